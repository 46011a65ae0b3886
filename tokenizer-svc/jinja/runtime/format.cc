// Python's two string formatting mini-languages: `fmt % args` and str.format().
// Declared in methods.h.
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "tokenizer-svc/jinja/py_str.h"
#include "tokenizer-svc/jinja/runtime/access.h"
#include "tokenizer-svc/jinja/runtime/methods.h"

namespace gantry::jinja {
namespace {

constexpr int64_t kMaxWidth = 1 << 16;

std::string PadTo(const std::string& s, int64_t width, char align, const std::string& fill) {
  int64_t len = static_cast<int64_t>(pystr::Length(s));
  if (width <= len) return s;
  int64_t pad = width - len;
  int64_t left = align == '<' ? 0 : align == '^' ? pad / 2 : pad;
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < pad - left; ++i) out += fill;
  return out;
}

// Formats a number with a C conversion (d, f, e, g, x, X, o) and precision.
absl::StatusOr<std::string> FormatNumber(const Value& v, char type, int precision, bool alt) {
  char buf[512];
  if (type == 'd' || type == 'x' || type == 'X' || type == 'o') {
    long long i;
    if (v.is_float()) {
      if (type != 'd') return PyError(absl::StrCat("%", std::string(1, type), " format: an integer is required, not float"));
      if (!std::isfinite(v.as_float())) return PyError("cannot convert float infinity or NaN to integer");
      if (std::fabs(v.as_float()) > 9.2e18) return PyError("integer is too large");
      i = static_cast<long long>(std::trunc(v.as_float()));
    } else {
      i = static_cast<long long>(v.as_int());
    }
    bool neg = i < 0;
    unsigned long long mag = neg ? 0ull - static_cast<unsigned long long>(i) : static_cast<unsigned long long>(i);
    const char* spec = type == 'd' ? "%llu" : type == 'x' ? "%llx" : type == 'X' ? "%llX" : "%llo";
    std::snprintf(buf, sizeof buf, spec, mag);
    std::string prefix = alt && type != 'd' ? (type == 'o' ? "0o" : type == 'x' ? "0x" : "0X") : "";
    return absl::StrCat(neg ? "-" : "", prefix, buf);
  }
  double d = v.as_double();
  if (!std::isfinite(d)) {
    std::string s = std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
    return (type == 'F' || type == 'E' || type == 'G') ? pystr::Upper(s) : s;
  }
  if (std::fabs(d) >= 1e300 && (type == 'f' || type == 'F')) precision = std::min(precision, 20);
  char spec[16];
  std::snprintf(spec, sizeof spec, alt ? "%%#.%d%c" : "%%.%d%c", std::min(precision, 100), type);
  std::snprintf(buf, sizeof buf, spec, d);
  return std::string(buf);
}

absl::StatusOr<std::string> ConvertOne(Env& env, const Value& v, char type, std::string flags,
                                       int64_t width, int precision) {
  std::string body;
  bool numeric = false;
  if (type == 's' || type == 'r' || type == 'a') {
    body = type == 's' ? ToStr(v) : Repr(v);
    if (precision >= 0) {
      std::vector<uint32_t> cps = pystr::CodePoints(body);
      body = pystr::FromCodePoints(cps, 0, static_cast<size_t>(precision));
    }
  } else if (type == 'c') {
    if (v.is_string() && pystr::Length(v.str()) == 1) {
      body = v.str();
    } else if (v.is_int() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
      body = pystr::FromCodePoints({static_cast<uint32_t>(v.as_int())}, 0, 1);
    } else {
      return PyError("%c requires int or char");
    }
  } else {
    if (!v.is_number()) {
      return PyError(absl::StrCat("%", std::string(1, type), " format: a real number is required, not ",
                                  TypeName(v)));
    }
    numeric = true;
    char c = type == 'i' || type == 'u' ? 'd' : type;
    GANTRY_ASSIGN_OR_RETURN(body, FormatNumber(v, c, precision < 0 ? 6 : precision,
                                                flags.find('#') != std::string::npos));
    if (body[0] != '-') {
      if (flags.find('+') != std::string::npos) {
        body = "+" + body;
      } else if (flags.find(' ') != std::string::npos) {
        body = " " + body;
      }
    }
  }
  GANTRY_RETURN_IF_ERROR(env.CheckString(static_cast<size_t>(std::max<int64_t>(width, 0)) + body.size()));
  if (flags.find('-') != std::string::npos) return PadTo(body, width, '<', " ");
  if (numeric && flags.find('0') != std::string::npos) {
    int64_t len = static_cast<int64_t>(body.size());
    if (width > len) {
      size_t sign = (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
      body.insert(sign, std::string(width - len, '0'));
    }
    return body;
  }
  return PadTo(body, width, '>', " ");
}

// Applies a str.format() spec: [[fill]align][sign][#][0][width][,][.precision][type].
absl::StatusOr<std::string> ApplySpec(Env& env, const Value& v, const std::string& spec) {
  if (spec.empty()) return ToStr(v);
  std::vector<uint32_t> cps = pystr::CodePoints(spec);
  size_t i = 0;
  std::string fill = " ";
  char align = '\0';
  auto is_align = [](uint32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    fill = pystr::FromCodePoints(cps, 0, 1);
    align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    align = static_cast<char>(cps[0]);
    i = 1;
  }
  std::string flags;
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' ')) flags += static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '#') flags += static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '0') {
    if (align == '\0') {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  int64_t width = 0;
  while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') {
    width = width * 10 + (cps[i++] - '0');
    if (width > kMaxWidth) return PyError("format width is too large");
  }
  if (i < cps.size() && (cps[i] == ',' || cps[i] == '_')) return PyError("grouping in format specs is not supported");
  int precision = -1;
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    precision = 0;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') {
      precision = precision * 10 + static_cast<int>(cps[i++] - '0');
      if (precision > 1000) return PyError("format precision is too large");
    }
  }
  char type = '\0';
  if (i < cps.size()) type = static_cast<char>(cps[i++]);
  if (i != cps.size()) return PyError("Invalid format specifier");
  std::string body;
  bool numeric = v.is_number() && !v.is_bool();
  if (v.is_string() || type == 's' || (!numeric && type == '\0')) {
    if (type != '\0' && type != 's') {
      return PyError(absl::StrCat("Unknown format code '", std::string(1, type), "' for object of type '",
                                  TypeName(v), "'"));
    }
    body = ToStr(v);
    if (precision >= 0) body = pystr::FromCodePoints(pystr::CodePoints(body), 0, precision);
    if (align == '\0') align = '<';
  } else {
    if (!v.is_number()) return PyError("format spec needs a number");
    char t = type;
    if (t == '\0') {
      if (v.is_int() && precision < 0) {
        t = 'd';
      } else if (precision < 0) {
        body = ToStr(v);
      } else {
        t = 'g';
      }
    }
    if (t == '%') {
      GANTRY_ASSIGN_OR_RETURN(body, FormatNumber(Value::Float(v.as_double() * 100), 'f', precision < 0 ? 6 : precision, false));
      body += "%";
    } else if (t != '\0') {
      if (t == 'n') t = 'd';
      if (t != 'd' && t != 'f' && t != 'F' && t != 'e' && t != 'E' && t != 'g' && t != 'G' &&
          t != 'x' && t != 'X' && t != 'o') {
        return PyError(absl::StrCat("Unknown format code '", std::string(1, t), "'"));
      }
      if ((t == 'd' || t == 'x' || t == 'X' || t == 'o') && v.is_float()) {
        return PyError(absl::StrCat("Unknown format code '", std::string(1, t), "' for object of type 'float'"));
      }
      GANTRY_ASSIGN_OR_RETURN(body, FormatNumber(v, t, precision < 0 ? 6 : precision, flags.find('#') != std::string::npos));
    }
    if (body[0] != '-' && flags.find('+') != std::string::npos) body = "+" + body;
    if (body[0] != '-' && flags.find(' ') != std::string::npos) body = " " + body;
    if (align == '\0') align = '>';
  }
  GANTRY_RETURN_IF_ERROR(env.CheckString(static_cast<size_t>(width) * fill.size() + body.size()));
  if (align == '=') {
    int64_t len = static_cast<int64_t>(pystr::Length(body));
    if (width <= len) return body;
    size_t sign = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    std::string pad;
    for (int64_t k = 0; k < width - len; ++k) pad += fill;
    return body.substr(0, sign) + pad + body.substr(sign);
  }
  return PadTo(body, width, align, fill);
}

}  // namespace

absl::StatusOr<std::string> PercentFormat(Env& env, const std::string& format, const Value& args) {
  ValueList values;
  bool mapping = args.is_dict();
  if (args.kind() == Value::Kind::kTuple) {
    values = args.list();
  } else {
    values.push_back(args);
  }
  size_t next = 0;
  std::string out;
  size_t i = 0;
  while (i < format.size()) {
    char c = format[i++];
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    if (i >= format.size()) return PyError("incomplete format");
    const Value* value = nullptr;
    Value keyed;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos) return PyError("incomplete format key");
      if (!mapping) return PyError("format requires a mapping");
      const Value* found = args.dict().Find(format.substr(i + 1, close - i - 1));
      if (found == nullptr) return PyError(absl::StrCat("KeyError: '", format.substr(i + 1, close - i - 1), "'"));
      keyed = *found;
      value = &keyed;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string("-+ #0").find(format[i]) != std::string::npos) flags += format[i++];
    int64_t width = 0;
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
      width = width * 10 + (format[i++] - '0');
      if (width > kMaxWidth) return PyError("format width is too large");
    }
    int precision = -1;
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = 0;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        precision = precision * 10 + (format[i++] - '0');
        if (precision > 1000) return PyError("format precision is too large");
      }
    }
    if (i >= format.size()) return PyError("incomplete format");
    char type = format[i++];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (std::string("sradiufFeEgGxXoc").find(type) == std::string::npos) {
      return PyError(absl::StrCat("unsupported format character '", std::string(1, type), "'"));
    }
    if (value == nullptr) {
      if (mapping) {
        value = &args;
      } else {
        if (next >= values.size()) return PyError("not enough arguments for format string");
        value = &values[next++];
      }
    }
    GANTRY_ASSIGN_OR_RETURN(std::string piece, ConvertOne(env, *value, type, flags, width, precision));
    out += piece;
    GANTRY_RETURN_IF_ERROR(env.CheckString(out.size()));
  }
  if (!mapping && next < values.size() && args.kind() == Value::Kind::kTuple) {
    return PyError("not all arguments converted during string formatting");
  }
  if (!mapping && next == 0 && args.kind() != Value::Kind::kTuple) {
    return PyError("not all arguments converted during string formatting");
  }
  return out;
}

absl::StatusOr<std::string> BraceFormat(Env& env, const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  size_t i = 0;
  while (i < format.size()) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        i += 2;
        continue;
      }
      return PyError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      i += 2;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) return PyError("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close + 1;
    std::string spec;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = '\0';
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size()) return PyError("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    size_t name_end = field.find_first_of(".[");
    std::string head = field.substr(0, name_end);
    Value v;
    if (head.empty()) {
      if (auto_index >= args.pos.size()) {
        return PyError(absl::StrCat("Replacement index ", auto_index, " out of range for positional args tuple"));
      }
      v = args.pos[auto_index++];
    } else if (head.find_first_not_of("0123456789") == std::string::npos) {
      size_t k = head.size() > 6 ? args.pos.size() : std::stoul(head);
      if (k >= args.pos.size()) return PyError(absl::StrCat("Replacement index ", head, " out of range for positional args tuple"));
      v = args.pos[k];
    } else {
      bool found = false;
      for (const auto& kw : args.kw) {
        if (kw.first == head) {
          v = kw.second;
          found = true;
        }
      }
      if (!found) return PyError(absl::StrCat("KeyError: '", head, "'"));
    }
    // Trailing .attr and [key] parts.
    size_t p = name_end;
    while (p != std::string::npos && p < field.size()) {
      if (field[p] == '.') {
        size_t end = field.find_first_of(".[", p + 1);
        GANTRY_ASSIGN_OR_RETURN(v, GetAttr(v, field.substr(p + 1, end == std::string::npos ? std::string::npos : end - p - 1)));
        p = end;
      } else {
        size_t end = field.find(']', p);
        if (end == std::string::npos) return PyError("Missing ']' in format string");
        std::string key = field.substr(p + 1, end - p - 1);
        Value k = (!key.empty() && key.find_first_not_of("0123456789") == std::string::npos && key.size() < 10)
                      ? Value::Int(std::stoll(key))
                      : Value::String(key);
        GANTRY_ASSIGN_OR_RETURN(v, GetItem(v, k));
        p = end + 1;
      }
    }
    if (conversion == 'r' || conversion == 'a') {
      v = Value::String(Repr(v));
    } else if (conversion == 's') {
      v = Value::String(ToStr(v));
    } else if (conversion != '\0') {
      return PyError("Unknown conversion specifier");
    }
    GANTRY_ASSIGN_OR_RETURN(std::string piece, ApplySpec(env, v, spec));
    out += piece;
    GANTRY_RETURN_IF_ERROR(env.CheckString(out.size()));
  }
  return out;
}

}  // namespace gantry::jinja
