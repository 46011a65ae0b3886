#include "worker/model/model.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_codes.h"
#include "common/status.h"
#include "formats/gguf/quant.h"
#include "worker/kernels/kernels.h"

namespace gantry::model {
namespace {

using gguf::TensorType;

absl::Status Bad(absl::string_view what) { return ReasonError("invalid_gguf", what); }

bool Supported(TensorType t) {
  switch (t) {
    case TensorType::kF32: case TensorType::kF16: case TensorType::kBF16:
    case TensorType::kQ8_0: case TensorType::kQ4_0:
    case TensorType::kQ4_K: case TensorType::kQ5_K: case TensorType::kQ6_K:
      return true;
    default:
      return false;
  }
}

class Binder {
 public:
  explicit Binder(const gguf::GgufFile& file) : file_(file) {}

  absl::StatusOr<kernels::Matrix> Matrix(const std::string& name, int rows, int cols) {
    const gguf::TensorInfo* t = file_.FindTensor(name);
    if (!t) return Bad(absl::StrCat("missing tensor ", name));
    if (t->dims.size() != 2 || t->dims[0] != static_cast<uint64_t>(cols) ||
        t->dims[1] != static_cast<uint64_t>(rows)) {
      return Bad(absl::StrCat("tensor ", name, " has shape [", absl::StrJoin(t->dims, ","),
                              "], expected [", cols, ",", rows, "]"));
    }
    if (!Supported(t->type)) {
      const char* type_name = gguf::TensorTypeName(t->type);
      return absl::UnimplementedError(absl::StrCat("tensor ", name, ": type ",
                                                   type_name ? type_name : "?", " is not supported yet"));
    }
    kernels::Matrix m;
    m.data = t->data;
    m.type = t->type;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = t->bytes / rows;
    return m;
  }

  // A 1-D tensor of n values decoded to float; `optional` makes absence return {}.
  absl::StatusOr<std::vector<float>> Vector(const std::string& name, int n, bool optional = false) {
    const gguf::TensorInfo* t = file_.FindTensor(name);
    if (!t) {
      if (optional) return std::vector<float>();
      return Bad(absl::StrCat("missing tensor ", name));
    }
    if (t->elements != static_cast<uint64_t>(n)) {
      return Bad(absl::StrCat("tensor ", name, " has ", t->elements, " values, expected ", n));
    }
    std::vector<float> v(n);
    absl::Status s = gguf::DecodeRow(t->data, t->type, n, v.data());
    if (!s.ok()) return s;
    return v;
  }

 private:
  const gguf::GgufFile& file_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const gguf::GgufFile& file) {
  std::unique_ptr<Model> m(new Model());
  ModelConfig& c = m->config_;
  GANTRY_ASSIGN_OR_RETURN(c.arch, file.GetString("general.architecture"));
  if (c.arch != "llama" && c.arch != "qwen2" && c.arch != "qwen3") {
    return absl::UnimplementedError(absl::StrCat("architecture ", c.arch, " is not supported"));
  }
  const std::string& a = c.arch;
  auto get = [&](const std::string& key, int* out, bool required = true, int fallback = 0) -> absl::Status {
    auto v = file.GetUint(a + "." + key);
    if (!v.ok()) {
      if (!required && absl::IsNotFound(v.status())) {
        *out = fallback;
        return absl::OkStatus();
      }
      return v.status();
    }
    if (*v == 0 || *v > (1u << 24)) return Bad(absl::StrCat(a, ".", key, " = ", *v, " is out of range"));
    *out = static_cast<int>(*v);
    return absl::OkStatus();
  };
  GANTRY_RETURN_IF_ERROR(get("block_count", &c.n_layer));
  GANTRY_RETURN_IF_ERROR(get("embedding_length", &c.n_embd));
  GANTRY_RETURN_IF_ERROR(get("attention.head_count", &c.n_head));
  GANTRY_RETURN_IF_ERROR(get("attention.head_count_kv", &c.n_head_kv, false, c.n_head));
  GANTRY_RETURN_IF_ERROR(get("feed_forward_length", &c.n_ff));
  GANTRY_RETURN_IF_ERROR(get("context_length", &c.context_length, false, 2048));
  GANTRY_RETURN_IF_ERROR(get("attention.key_length", &c.head_dim, false, c.n_embd / c.n_head));
  if (c.n_head % c.n_head_kv != 0) return Bad("head_count is not a multiple of head_count_kv");
  if (c.head_dim % 2 != 0) return Bad("head dimension is odd");
  if (auto eps = file.GetFloat(a + ".attention.layer_norm_rms_epsilon"); eps.ok()) {
    c.rms_eps = static_cast<float>(*eps);
  }
  if (auto base = file.GetFloat(a + ".rope.freq_base"); base.ok()) c.rope_base = static_cast<float>(*base);
  c.rope_mode = a == "llama" ? kernels::RopeMode::kNorm : kernels::RopeMode::kNeox;
  c.qk_norm = a == "qwen3";

  const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) return Bad("missing or mis-shaped token_embd.weight");
  if (embd->dims[1] > (1u << 24)) return Bad("vocabulary too large");
  c.n_vocab = static_cast<int>(embd->dims[1]);

  Binder b(file);
  const int q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  GANTRY_ASSIGN_OR_RETURN(m->token_embd_, b.Matrix("token_embd.weight", c.n_vocab, c.n_embd));
  GANTRY_ASSIGN_OR_RETURN(m->output_norm_, b.Vector("output_norm.weight", c.n_embd));
  if (file.FindTensor("output.weight")) {
    GANTRY_ASSIGN_OR_RETURN(m->output_, b.Matrix("output.weight", c.n_vocab, c.n_embd));
  } else {
    m->output_ = m->token_embd_;
    c.tied_output = true;
  }
  m->layers_.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    LayerWeights& w = m->layers_[l];
    GANTRY_ASSIGN_OR_RETURN(w.attn_norm, b.Vector(p + "attn_norm.weight", c.n_embd));
    GANTRY_ASSIGN_OR_RETURN(w.wq, b.Matrix(p + "attn_q.weight", q_dim, c.n_embd));
    GANTRY_ASSIGN_OR_RETURN(w.wk, b.Matrix(p + "attn_k.weight", kv_dim, c.n_embd));
    GANTRY_ASSIGN_OR_RETURN(w.wv, b.Matrix(p + "attn_v.weight", kv_dim, c.n_embd));
    GANTRY_ASSIGN_OR_RETURN(w.wo, b.Matrix(p + "attn_output.weight", c.n_embd, q_dim));
    GANTRY_ASSIGN_OR_RETURN(w.bq, b.Vector(p + "attn_q.bias", q_dim, true));
    GANTRY_ASSIGN_OR_RETURN(w.bk, b.Vector(p + "attn_k.bias", kv_dim, true));
    GANTRY_ASSIGN_OR_RETURN(w.bv, b.Vector(p + "attn_v.bias", kv_dim, true));
    if (c.qk_norm) {
      GANTRY_ASSIGN_OR_RETURN(w.q_norm, b.Vector(p + "attn_q_norm.weight", c.head_dim));
      GANTRY_ASSIGN_OR_RETURN(w.k_norm, b.Vector(p + "attn_k_norm.weight", c.head_dim));
    }
    GANTRY_ASSIGN_OR_RETURN(w.ffn_norm, b.Vector(p + "ffn_norm.weight", c.n_embd));
    GANTRY_ASSIGN_OR_RETURN(w.w_gate, b.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd));
    GANTRY_ASSIGN_OR_RETURN(w.w_up, b.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd));
    GANTRY_ASSIGN_OR_RETURN(w.w_down, b.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff));
  }
  // The kernel set's own layout of the matrices it packs (the embedding table is only
  // looked up row by row, from the mapping).
  const kernels::KernelSet& k = kernels::Kernels();
  auto pack = [&](kernels::Matrix* mat) {
    const size_t bytes = k.packed_bytes ? k.packed_bytes(*mat) : 0;
    if (bytes == 0) return;
    m->packed_.emplace_back(new uint8_t[bytes]);
    k.pack(*mat, m->packed_.back().get());
    mat->packed = m->packed_.back().get();
    m->packed_bytes_ += bytes;
    // The products read only the copy now: the original pages need not stay resident.
    file.ReleasePages(mat->data, mat->row_bytes * mat->rows);
  };
  pack(&m->output_);
  for (LayerWeights& w : m->layers_) {
    for (kernels::Matrix* mat : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) pack(mat);
  }
  return m;
}

size_t Model::WeightBytesPerToken() const {
  size_t bytes = output_.row_bytes * output_.rows + token_embd_.row_bytes;
  for (const LayerWeights& w : layers_) {
    for (const kernels::Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      bytes += m->row_bytes * m->rows;
    }
  }
  return bytes;
}

}  // namespace gantry::model
