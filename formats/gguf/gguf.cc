#include "formats/gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"

namespace gantry::gguf {
namespace {

// Limits against hostile files: far above any real model, far below what could
// exhaust memory while parsing metadata.
constexpr uint64_t kMaxKeyValues = 1 << 20;
constexpr uint64_t kMaxTensors = 1 << 20;
constexpr uint64_t kMaxArrayElements = 1 << 26;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 2;

absl::Status Invalid(uint64_t offset, absl::string_view what) {
  return ReasonError("invalid_gguf", absl::StrCat("byte ", offset, ": ", what));
}

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

class Cursor {
 public:
  explicit Cursor(absl::string_view bytes) : bytes_(bytes) {}
  uint64_t pos() const { return pos_; }
  uint64_t size() const { return bytes_.size(); }

  template <typename T>
  absl::Status Read(T* out, absl::string_view what) {
    if (bytes_.size() - pos_ < sizeof(T)) return Invalid(pos_, absl::StrCat("truncated ", what));
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string* out, absl::string_view what) {
    uint64_t n = 0;
    absl::Status s = Read(&n, what);
    if (!s.ok()) return s;
    if (n > bytes_.size() - pos_) {
      return Invalid(pos_, absl::StrCat(what, " of ", n, " bytes runs past the end of the file"));
    }
    out->assign(bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

 private:
  absl::string_view bytes_;
  uint64_t pos_ = 0;
};

absl::Status ReadValue(Cursor* c, ValueType type, int depth, Value* out) {
  out->type = type;
  switch (type) {
    case ValueType::kUint8: { uint8_t v{}; auto s = c->Read(&v, "u8"); out->u = v; return s; }
    case ValueType::kInt8: { int8_t v{}; auto s = c->Read(&v, "i8"); out->i = v; return s; }
    case ValueType::kUint16: { uint16_t v{}; auto s = c->Read(&v, "u16"); out->u = v; return s; }
    case ValueType::kInt16: { int16_t v{}; auto s = c->Read(&v, "i16"); out->i = v; return s; }
    case ValueType::kUint32: { uint32_t v{}; auto s = c->Read(&v, "u32"); out->u = v; return s; }
    case ValueType::kInt32: { int32_t v{}; auto s = c->Read(&v, "i32"); out->i = v; return s; }
    case ValueType::kUint64: { uint64_t v{}; auto s = c->Read(&v, "u64"); out->u = v; return s; }
    case ValueType::kInt64: { int64_t v{}; auto s = c->Read(&v, "i64"); out->i = v; return s; }
    case ValueType::kFloat32: { float v{}; auto s = c->Read(&v, "f32"); out->f = v; return s; }
    case ValueType::kFloat64: { double v{}; auto s = c->Read(&v, "f64"); out->f = v; return s; }
    case ValueType::kBool: {
      uint8_t v{};
      auto s = c->Read(&v, "bool");
      if (s.ok() && v > 1) return Invalid(c->pos() - 1, "bool value not 0 or 1");
      out->u = v;
      return s;
    }
    case ValueType::kString: return c->ReadString(&out->s, "string");
    case ValueType::kArray: {
      if (depth >= kMaxArrayDepth) return Invalid(c->pos(), "arrays nested too deeply");
      uint32_t element_type = 0;
      uint64_t count = 0;
      GANTRY_RETURN_IF_ERROR(c->Read(&element_type, "array element type"));
      GANTRY_RETURN_IF_ERROR(c->Read(&count, "array length"));
      if (element_type > static_cast<uint32_t>(ValueType::kFloat64)) {
        return Invalid(c->pos() - 12, absl::StrCat("unknown array element type ", element_type));
      }
      // Every element takes at least one byte: a count beyond the rest of the file is a lie.
      if (count > kMaxArrayElements || count > c->size() - c->pos()) {
        return Invalid(c->pos() - 8, absl::StrCat("array length ", count, " is impossible here"));
      }
      out->element_type = static_cast<ValueType>(element_type);
      out->array.resize(count);
      for (uint64_t k = 0; k < count; ++k) {
        GANTRY_RETURN_IF_ERROR(ReadValue(c, out->element_type, depth + 1, &out->array[k]));
      }
      return absl::OkStatus();
    }
  }
  return Invalid(c->pos(), absl::StrCat("unknown value type ", static_cast<uint32_t>(type)));
}

}  // namespace

const char* TensorTypeName(TensorType type) {
  switch (type) {
    case TensorType::kF32: return "F32";
    case TensorType::kF16: return "F16";
    case TensorType::kBF16: return "BF16";
    case TensorType::kQ4_0: return "Q4_0";
    case TensorType::kQ8_0: return "Q8_0";
    case TensorType::kQ4_K: return "Q4_K";
    case TensorType::kQ5_K: return "Q5_K";
    case TensorType::kQ6_K: return "Q6_K";
  }
  return nullptr;
}

bool TensorTypeLayout(TensorType type, uint64_t* block_elements, uint64_t* block_bytes) {
  switch (type) {
    case TensorType::kF32: *block_elements = 1; *block_bytes = 4; return true;
    case TensorType::kF16: *block_elements = 1; *block_bytes = 2; return true;
    case TensorType::kBF16: *block_elements = 1; *block_bytes = 2; return true;
    case TensorType::kQ4_0: *block_elements = 32; *block_bytes = 18; return true;
    case TensorType::kQ8_0: *block_elements = 32; *block_bytes = 34; return true;
    case TensorType::kQ4_K: *block_elements = 256; *block_bytes = 144; return true;
    case TensorType::kQ5_K: *block_elements = 256; *block_bytes = 176; return true;
    case TensorType::kQ6_K: *block_elements = 256; *block_bytes = 210; return true;
  }
  return false;
}

absl::optional<uint64_t> Value::AsUint() const {
  switch (type) {
    case ValueType::kUint8: case ValueType::kUint16: case ValueType::kUint32:
    case ValueType::kUint64: case ValueType::kBool:
      return u;
    case ValueType::kInt8: case ValueType::kInt16: case ValueType::kInt32: case ValueType::kInt64:
      if (i < 0) return absl::nullopt;
      return static_cast<uint64_t>(i);
    default:
      return absl::nullopt;
  }
}

absl::optional<double> Value::AsFloat() const {
  if (type == ValueType::kFloat32 || type == ValueType::kFloat64) return f;
  if (auto v = AsUint()) return static_cast<double>(*v);
  if (type == ValueType::kInt8 || type == ValueType::kInt16 || type == ValueType::kInt32 ||
      type == ValueType::kInt64) {
    return static_cast<double>(i);
  }
  return absl::nullopt;
}

GgufFile::~GgufFile() {
  if (mapping_) ::munmap(mapping_, mapping_size_);
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(errno));
    if (errno == ENOENT) return absl::NotFoundError(message);
    if (errno == EACCES) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return ReasonError("invalid_gguf", absl::StrCat(path, " is not a regular file"));
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->mapping_size_ = static_cast<size_t>(st.st_size);
  if (file->mapping_size_ > 0) {
    void* m = ::mmap(nullptr, file->mapping_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("cannot map ", path, ": ", std::strerror(errno)));
    }
    file->mapping_ = m;
  }
  ::close(fd);
  absl::Status parsed = file->Parse(
      absl::string_view(static_cast<const char*>(file->mapping_), file->mapping_size_));
  if (!parsed.ok()) {
    return Error(parsed.code(), ReasonOf(parsed), absl::StrCat(path, ": ", parsed.message()));
  }
  return file;
}

void GgufFile::ReleasePages(const uint8_t* data, size_t bytes) const {
  if (!mapping_ || bytes == 0) return;
  const uintptr_t base = reinterpret_cast<uintptr_t>(mapping_);
  uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  if (begin < base || begin - base > mapping_size_ || bytes > mapping_size_ - (begin - base)) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t end = begin + bytes;
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(absl::string_view bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  GANTRY_RETURN_IF_ERROR(file->Parse(bytes));
  return file;
}

absl::Status GgufFile::Parse(absl::string_view bytes) {
  Cursor c(bytes);
  uint32_t magic = 0, version = 0;
  uint64_t tensor_count = 0, kv_count = 0;
  GANTRY_RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (magic != kMagic) return Invalid(0, "not a GGUF file (bad magic)");
  GANTRY_RETURN_IF_ERROR(c.Read(&version, "version"));
  if (version != kVersion) return Invalid(4, absl::StrCat("GGUF version ", version, ", only 3 is read"));
  GANTRY_RETURN_IF_ERROR(c.Read(&tensor_count, "tensor count"));
  GANTRY_RETURN_IF_ERROR(c.Read(&kv_count, "metadata count"));
  if (tensor_count > kMaxTensors) return Invalid(8, absl::StrCat("tensor count ", tensor_count));
  if (kv_count > kMaxKeyValues) return Invalid(16, absl::StrCat("metadata count ", kv_count));

  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string key;
    const uint64_t at = c.pos();
    GANTRY_RETURN_IF_ERROR(c.ReadString(&key, "metadata key"));
    if (key.empty()) return Invalid(at, "empty metadata key");
    uint32_t type = 0;
    GANTRY_RETURN_IF_ERROR(c.Read(&type, "metadata value type"));
    if (type > static_cast<uint32_t>(ValueType::kFloat64)) {
      return Invalid(c.pos() - 4, absl::StrCat("unknown value type ", type, " for ", key));
    }
    Value value;
    GANTRY_RETURN_IF_ERROR(ReadValue(&c, static_cast<ValueType>(type), 0, &value));
    if (!metadata_.emplace(key, std::move(value)).second) {
      return Invalid(at, absl::StrCat("duplicate metadata key ", key));
    }
  }
  if (const Value* a = Find("general.alignment")) {
    auto v = a->AsUint();
    if (!v || *v == 0 || *v > 65536 || (*v & (*v - 1)) != 0) {
      return Invalid(0, "general.alignment is not a power of two up to 65536");
    }
    alignment_ = static_cast<uint32_t>(*v);
  }

  tensors_.resize(tensor_count);
  for (uint64_t t = 0; t < tensor_count; ++t) {
    TensorInfo& info = tensors_[t];
    const uint64_t at = c.pos();
    GANTRY_RETURN_IF_ERROR(c.ReadString(&info.name, "tensor name"));
    uint32_t n_dims = 0;
    GANTRY_RETURN_IF_ERROR(c.Read(&n_dims, "tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Invalid(at, absl::StrCat("tensor ", info.name, " has ", n_dims, " dimensions"));
    }
    info.dims.resize(n_dims);
    info.elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      GANTRY_RETURN_IF_ERROR(c.Read(&info.dims[d], "tensor dimension"));
      if (info.dims[d] == 0 || MulOverflows(info.elements, info.dims[d], &info.elements)) {
        return Invalid(at, absl::StrCat("tensor ", info.name, " has an impossible shape"));
      }
    }
    uint32_t type = 0;
    GANTRY_RETURN_IF_ERROR(c.Read(&type, "tensor type"));
    info.type = static_cast<TensorType>(type);
    uint64_t block_elements = 0, block_bytes = 0;
    if (!TensorTypeLayout(info.type, &block_elements, &block_bytes)) {
      return Invalid(at, absl::StrCat("tensor ", info.name, " has unsupported type ", type));
    }
    if (info.dims[0] % block_elements != 0) {
      return Invalid(at, absl::StrCat("tensor ", info.name, " row length ", info.dims[0],
                                      " is not a multiple of the ", TensorTypeName(info.type),
                                      " block of ", block_elements));
    }
    if (MulOverflows(info.elements / block_elements, block_bytes, &info.bytes)) {
      return Invalid(at, absl::StrCat("tensor ", info.name, " is impossibly large"));
    }
    GANTRY_RETURN_IF_ERROR(c.Read(&info.offset, "tensor offset"));
    if (info.offset % alignment_ != 0) {
      return Invalid(at, absl::StrCat("tensor ", info.name, " offset is not aligned"));
    }
    if (!tensor_index_.emplace(info.name, t).second) {
      return Invalid(at, absl::StrCat("duplicate tensor ", info.name));
    }
  }
  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > bytes.size() && tensor_count > 0) {
    return Invalid(c.pos(), "file ends before the data section");
  }
  for (TensorInfo& info : tensors_) {
    uint64_t end = 0;
    if (__builtin_add_overflow(data_start, info.offset, &end) ||
        __builtin_add_overflow(end, info.bytes, &end) || end > bytes.size()) {
      return Invalid(data_start + info.offset,
                     absl::StrCat("tensor ", info.name, " data runs past the end of the file"));
    }
    info.data = reinterpret_cast<const uint8_t*>(bytes.data()) + data_start + info.offset;
  }
  return absl::OkStatus();
}

const Value* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  const Value* v = Find(key);
  if (!v) return absl::NotFoundError(absl::StrCat("GGUF metadata has no ", key));
  if (v->type != ValueType::kString) return ReasonError("invalid_gguf", absl::StrCat(key, " is not a string"));
  return v->s;
}

absl::StatusOr<uint64_t> GgufFile::GetUint(const std::string& key) const {
  const Value* v = Find(key);
  if (!v) return absl::NotFoundError(absl::StrCat("GGUF metadata has no ", key));
  auto u = v->AsUint();
  if (!u) return ReasonError("invalid_gguf", absl::StrCat(key, " is not an unsigned integer"));
  return *u;
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const Value* v = Find(key);
  if (!v) return absl::NotFoundError(absl::StrCat("GGUF metadata has no ", key));
  auto f = v->AsFloat();
  if (!f) return ReasonError("invalid_gguf", absl::StrCat(key, " is not a number"));
  return *f;
}

// ---------------------------------------------------------------------------------
// Writer

namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutString(std::string* out, absl::string_view s) {
  Put<uint64_t>(out, s.size());
  out->append(s.data(), s.size());
}

}  // namespace

void GgufWriter::AddString(const std::string& key, const std::string& value) {
  PutString(&metadata_, key);
  Put<uint32_t>(&metadata_, static_cast<uint32_t>(ValueType::kString));
  PutString(&metadata_, value);
  ++metadata_count_;
}

void GgufWriter::AddUint32(const std::string& key, uint32_t value) {
  PutString(&metadata_, key);
  Put<uint32_t>(&metadata_, static_cast<uint32_t>(ValueType::kUint32));
  Put<uint32_t>(&metadata_, value);
  ++metadata_count_;
}

void GgufWriter::AddFloat32(const std::string& key, float value) {
  PutString(&metadata_, key);
  Put<uint32_t>(&metadata_, static_cast<uint32_t>(ValueType::kFloat32));
  Put<float>(&metadata_, value);
  ++metadata_count_;
}

void GgufWriter::AddBool(const std::string& key, bool value) {
  PutString(&metadata_, key);
  Put<uint32_t>(&metadata_, static_cast<uint32_t>(ValueType::kBool));
  Put<uint8_t>(&metadata_, value ? 1 : 0);
  ++metadata_count_;
}

void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& values) {
  PutString(&metadata_, key);
  Put<uint32_t>(&metadata_, static_cast<uint32_t>(ValueType::kArray));
  Put<uint32_t>(&metadata_, static_cast<uint32_t>(ValueType::kString));
  Put<uint64_t>(&metadata_, values.size());
  for (const auto& v : values) PutString(&metadata_, v);
  ++metadata_count_;
}

void GgufWriter::AddInt32Array(const std::string& key, const std::vector<int32_t>& values) {
  AddNumberArray(key, ValueType::kInt32, values);
}

void GgufWriter::AddFloat32Array(const std::string& key, const std::vector<float>& values) {
  AddNumberArray(key, ValueType::kFloat32, values);
}

template <typename T>
void GgufWriter::AddNumberArray(const std::string& key, ValueType type, const std::vector<T>& values) {
  PutString(&metadata_, key);
  Put<uint32_t>(&metadata_, static_cast<uint32_t>(ValueType::kArray));
  Put<uint32_t>(&metadata_, static_cast<uint32_t>(type));
  Put<uint64_t>(&metadata_, values.size());
  for (T v : values) Put<T>(&metadata_, v);
  ++metadata_count_;
}

absl::Status GgufWriter::AddTensor(const std::string& name, std::vector<uint64_t> dims,
                                   TensorType type, std::string data) {
  uint64_t block_elements = 0, block_bytes = 0;
  if (!TensorTypeLayout(type, &block_elements, &block_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": unknown tensor type"));
  }
  uint64_t elements = 1;
  for (uint64_t d : dims) elements *= d;
  if (dims.empty() || dims[0] % block_elements != 0 ||
      data.size() != elements / block_elements * block_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", data.size(), " bytes do not fit the shape and type"));
  }
  tensors_.push_back({name, std::move(dims), type, std::move(data)});
  return absl::OkStatus();
}

std::string GgufWriter::Serialize() const {
  std::string out;
  Put<uint32_t>(&out, kMagic);
  Put<uint32_t>(&out, kVersion);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, metadata_count_);
  out += metadata_;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) Put<uint64_t>(&out, d);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&out, offset);
    offset += (t.data.size() + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment;
  }
  out.resize((out.size() + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment, '\0');
  for (const Tensor& t : tensors_) {
    out += t.data;
    out.resize((out.size() + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment, '\0');
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  const std::string bytes = Serialize();
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace gantry::gguf
