// GGUF v3: the model file format of llama.cpp, read over mmap and written by our tools.
// docs/gguf.md restates the layout we rely on; this header is the contract.
//
// Reading checks the file against the format before anything uses it: magic, version 3,
// counts within the file, every string and array inside the file, known value and tensor
// types, tensor dimensions and byte sizes without overflow, offsets aligned and every
// tensor's bytes inside the data section. A bad or truncated file is an error
// (INVALID_ARGUMENT, reason "invalid_gguf", naming the byte offset), never a crash.
//
// Thread-safety: a GgufFile is immutable after Open() and may be read from many threads.
#ifndef GANTRY_FORMATS_GGUF_GGUF_H_
#define GANTRY_FORMATS_GGUF_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace gantry::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kVersion = 3;
inline constexpr uint32_t kDefaultAlignment = 32;

enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

// ggml tensor types Gantry reads (the numbers are ggml's).
enum class TensorType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30,
};

// "F32", "Q4_K", ...; nullptr for a type Gantry does not read.
const char* TensorTypeName(TensorType type);
// Elements per block and bytes per block; false for an unknown type.
bool TensorTypeLayout(TensorType type, uint64_t* block_elements, uint64_t* block_bytes);

// One metadata value. Scalars keep their GGUF type; arrays hold their elements.
struct Value {
  ValueType type = ValueType::kUint8;
  ValueType element_type = ValueType::kUint8;  // for arrays
  uint64_t u = 0;        // unsigned integers and bool
  int64_t i = 0;         // signed integers
  double f = 0;          // floats
  std::string s;         // string
  std::vector<Value> array;

  // Any integer type that fits in uint64 (negative signed values do not).
  absl::optional<uint64_t> AsUint() const;
  absl::optional<double> AsFloat() const;
};

struct TensorInfo {
  std::string name;
  // ggml order: dims[0] is the row length (contiguous), as in the file.
  std::vector<uint64_t> dims;
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t elements = 0;
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
};

class GgufFile {
 public:
  // Maps and validates `path`. Errors: NOT_FOUND / PERMISSION_DENIED / UNAVAILABLE from
  // the OS; INVALID_ARGUMENT (reason "invalid_gguf") for anything wrong in the bytes.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Validates bytes already in memory (not copied: `bytes` must outlive the result).
  // For tests and the fuzz target.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(absl::string_view bytes);
  ~GgufFile();

  uint32_t alignment() const { return alignment_; }
  const std::map<std::string, Value>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* Find(const std::string& key) const;
  const TensorInfo* FindTensor(const std::string& name) const;
  // Typed lookups: NOT_FOUND when absent, INVALID_ARGUMENT (invalid_gguf) on a type
  // mismatch, both naming the key.
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<uint64_t> GetUint(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;

  // Hints that [data, data + bytes) (tensor bytes of this file) will not be read soon:
  // the whole pages inside it leave the process's resident memory (madvise
  // MADV_DONTNEED on the read-only private mapping; a later read maps them again from
  // the file). The bytes stay valid and unchanged. No-op for FromBytes files and for
  // ranges outside the mapping.
  void ReleasePages(const uint8_t* data, size_t bytes) const;

 private:
  GgufFile() = default;
  absl::Status Parse(absl::string_view bytes);

  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Builds a GGUF v3 file: metadata in insertion order, tensors aligned.
class GgufWriter {
 public:
  void AddString(const std::string& key, const std::string& value);
  void AddUint32(const std::string& key, uint32_t value);
  void AddFloat32(const std::string& key, float value);
  void AddBool(const std::string& key, bool value);
  void AddStringArray(const std::string& key, const std::vector<std::string>& values);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& values);
  void AddFloat32Array(const std::string& key, const std::vector<float>& values);
  // `data` holds the tensor in its type's encoding; its size must match dims and type.
  // Precondition (returned as INVALID_ARGUMENT): known type, dims[0] a multiple of the
  // block size, size consistent.
  absl::Status AddTensor(const std::string& name, std::vector<uint64_t> dims, TensorType type,
                         std::string data);
  // Writes the file (to a temporary name, then renamed into place).
  absl::Status WriteFile(const std::string& path) const;
  std::string Serialize() const;

 private:
  // An array of `type` (kInt32 for int32_t, kFloat32 for float) holding `values`.
  template <typename T>
  void AddNumberArray(const std::string& key, ValueType type, const std::vector<T>& values);

  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
    std::string data;
  };
  std::string metadata_;
  uint64_t metadata_count_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace gantry::gguf

#endif  // GANTRY_FORMATS_GGUF_GGUF_H_
