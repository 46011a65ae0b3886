// A transformer model over a mapped GGUF file: its configuration and its weights.
//
// Supported architectures: "llama" (Llama 2/3, Mistral: rope NORM), "qwen2" (rope
// NEOX, q/k/v biases), "qwen3" (rope NEOX, per-head q/k RMS norms, key length
// independent of width). Grouped-query attention; an absent output.weight means the
// head is tied to token_embd. Weight matrices stay in the mapping in their own
// encoding, and where the chosen kernel set packs a type (kernels.h: avx512vnni, Q8_0)
// its products read a repacked copy made at load instead (PackedBytes(), about as many
// bytes as those matrices); their mapped pages are then released from resident memory
// (GgufFile::ReleasePages) and read again from the file only by embedding lookups and
// the reference path. Small vectors (norms, biases) are decoded to float at load.
//
// Thread-safety: immutable after Load(); share one Model between sessions.
#ifndef GANTRY_WORKER_MODEL_MODEL_H_
#define GANTRY_WORKER_MODEL_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/gguf/gguf.h"
#include "worker/kernels/ops.h"

namespace gantry::model {

struct ModelConfig {
  std::string arch;
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_vocab = 0;
  int context_length = 0;
  float rms_eps = 1e-6f;
  float rope_base = 10000.0f;
  kernels::RopeMode rope_mode = kernels::RopeMode::kNorm;
  bool qk_norm = false;
  bool tied_output = false;
};

struct LayerWeights {
  std::vector<float> attn_norm;
  kernels::Matrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;          // qwen2 biases; empty when absent
  std::vector<float> q_norm, k_norm;      // qwen3; empty when absent
  std::vector<float> ffn_norm;
  kernels::Matrix w_gate, w_up, w_down;
};

class Model {
 public:
  // Reads the configuration and binds every weight, checking names, shapes and types.
  // The GgufFile must outlive the Model. Errors: INVALID_ARGUMENT (reason
  // "invalid_gguf") naming the missing or mis-shaped tensor or key; UNIMPLEMENTED for
  // an architecture or tensor type not supported yet.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const gguf::GgufFile& file);

  const ModelConfig& config() const { return config_; }
  const kernels::Matrix& token_embedding() const { return token_embd_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  // token_embd when the head is tied.
  const kernels::Matrix& output() const { return output_; }
  // Bytes of weights read to produce one token (all matrices once), for bandwidth math.
  size_t WeightBytesPerToken() const;
  // Bytes of weight copies the kernel set repacked at load (Matrix::packed; the
  // avx512vnni set's Q8_0 layout), held in memory beside the mapping.
  size_t PackedBytes() const { return packed_bytes_; }

 private:
  ModelConfig config_;
  kernels::Matrix token_embd_, output_;
  std::vector<LayerWeights> layers_;
  std::vector<float> output_norm_;
  std::vector<std::unique_ptr<uint8_t[]>> packed_;  // what the matrices' `packed` point into
  size_t packed_bytes_ = 0;
};

}  // namespace gantry::model

#endif  // GANTRY_WORKER_MODEL_MODEL_H_
