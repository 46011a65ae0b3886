// Words and option grammars of the programs the sandbox models (program_words.h).
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/program_words.h"

namespace gantry::sandbox::programs {

std::string Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

std::string Short(absl::string_view s) {
  return s.size() > 120 ? absl::StrCat(s.substr(0, 120), "...") : std::string(s);
}

bool IsAssignment(absl::string_view word) {
  size_t eq = word.find('=');
  if (eq == 0 || eq == absl::string_view::npos) return false;
  for (size_t i = 0; i < eq; ++i) {
    char c = word[i];
    if (!(absl::ascii_isalnum(c) || c == '_') || (i == 0 && absl::ascii_isdigit(c))) return false;
  }
  return true;
}

OptionReader::Result OptionReader::Next(Option* o, std::string* error) {
  *o = Option{};
  if (pos_ > 0) return NextShort(o, error);
  dashdash_ = false;
  if (i_ >= a_->size()) return kEnd;
  const std::string& w = (*a_)[i_];
  if (w == "--") {
    ++i_;
    dashdash_ = true;
    return kEnd;
  }
  if (w.size() < 2 || w[0] != '-') return kEnd;
  if (w[1] == '-') return NextLong(o, error);
  pos_ = 1;
  return NextShort(o, error);
}

OptionReader::Result OptionReader::NextShort(Option* o, std::string* error) {
  const std::string& w = (*a_)[i_];
  const char c = w[pos_];
  const char* at = c == ':' ? nullptr : strchr(g_.shorts, c);
  if (at == nullptr || c == '\0') {
    *error = absl::StrCat("option '-", std::string(1, c), "' (in '", Short(w),
                          "') is not understood");
    return kError;
  }
  Arity arity = at[1] != ':' ? Arity::kNone : at[2] == ':' ? Arity::kOptional : Arity::kRequired;
  o->key = {'-', c};
  const std::string rest = w.substr(pos_ + 1);
  if (arity == Arity::kNone) {
    if (++pos_ >= w.size()) {
      pos_ = 0;
      ++i_;
    }
    return kOption;
  }
  pos_ = 0;
  ++i_;
  if (!rest.empty()) {
    o->value = rest;
    o->has_value = true;
  } else if (arity == Arity::kRequired) {
    if (i_ >= a_->size()) {
      *error = absl::StrCat("option -", std::string(1, c), " needs a value");
      return kError;
    }
    o->value = (*a_)[i_++];
    o->has_value = true;
  }
  return kOption;
}

OptionReader::Result OptionReader::NextLong(Option* o, std::string* error) {
  const std::string& w = (*a_)[i_];
  const size_t eq = w.find('=');
  const std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  const LongOption* match = nullptr;
  for (const auto& l : g_.longs) {
    if (name == l.name) match = &l;
  }
  if (match == nullptr) {
    for (const auto& l : g_.longs) {
      if (name.empty() || !absl::StartsWith(l.name, name)) continue;
      if (match != nullptr && (std::string(match->key) != l.key || match->arity != l.arity)) {
        *error = absl::StrCat("option '--", Short(name), "' is ambiguous");
        return kError;
      }
      match = &l;
    }
  }
  if (match == nullptr) {
    *error = absl::StrCat("option '", Short(w), "' is not understood");
    return kError;
  }
  o->key = match->key;
  ++i_;
  if (eq != std::string::npos) {
    if (match->arity == Arity::kNone) {
      *error = absl::StrCat("option --", match->name, " takes no value");
      return kError;
    }
    o->value = w.substr(eq + 1);
    o->has_value = true;
  } else if (match->arity == Arity::kRequired) {
    if (i_ >= a_->size()) {
      *error = absl::StrCat("option --", match->name, " needs a value");
      return kError;
    }
    o->value = (*a_)[i_++];
    o->has_value = true;
  }
  return kOption;
}

int ReadOptions(const Argv& a, size_t from, const Grammar& g, std::vector<Option>* out,
                std::string* error) {
  OptionReader r(&a, from, g);
  Option o;
  while (true) {
    OptionReader::Result res = r.Next(&o, error);
    if (res == OptionReader::kError) return -1;
    if (res == OptionReader::kEnd) return static_cast<int>(r.index());
    out->push_back(o);
  }
}

Argv WordsFrom(const Argv& a, size_t from) {
  return from >= a.size() ? Argv{} : Argv(a.begin() + static_cast<long>(from), a.end());
}

Inner ShellCommand(std::string text) { return Inner{{"/bin/sh", "-c", std::move(text)}}; }

}  // namespace gantry::sandbox::programs
