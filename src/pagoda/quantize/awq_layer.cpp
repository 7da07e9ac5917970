// The four AWQ groups of a Llama layer and how each one's scale is folded into the op before it.
#include "pagoda/quantize/awq_layer.h"

namespace pagoda::quantizer {
namespace {

void scale_columns(Matrix& w, const std::vector<float>& s) {  // W * s: the linear sees x / s
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) w.at(r, c) *= s[c];
}
void divide_columns(Matrix& x, const std::vector<float>& s) {
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c) x.at(r, c) /= s[c];
}
void divide_rows(Matrix& w, const std::vector<float>& s) {  // the previous linear's outputs, / s
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) w.at(r, c) /= s[r];
}
void divide(std::vector<float>& norm, const std::vector<float>& s) {
  for (size_t i = 0; i < norm.size(); ++i) norm[i] /= s[i];
}

GroupReport report(const char* linears, const ScaleSearchResult& r) {
  return {linears, r.best_ratio, r.mse_rtn, r.mse_best, true};
}

}  // namespace

std::vector<GroupReport> awq_scale_and_clip_layer(DenseLayer& layer, const LayerShape& shape, const Batch& batch,
                                                  LayerInputs& inputs, const AwqSearchOptions& options) {
  const DenseLayer& l = layer;
  const ScaleSearchResult qkv = search_best_scales(
      {&l.wq, &l.wk, &l.wv}, inputs.attn_in, attention_block(l, shape, batch, inputs.attn_in, l.wq, l.wk, l.wv),
      [&](const std::vector<Matrix>& c) { return attention_block(l, shape, batch, inputs.attn_in, c[0], c[1], c[2]); },
      options);
  const bool scale_o = l.wv.rows == l.wo.rows && l.wv.cols == l.wo.cols;
  ScaleSearchResult o;
  if (scale_o)
    o = search_best_scales({&l.wo}, inputs.o_in, linear(inputs.o_in, l.wo),
                           [&](const std::vector<Matrix>& c) { return linear(inputs.o_in, c[0]); }, options);
  const ScaleSearchResult gate_up = search_best_scales(
      {&l.w_gate, &l.w_up}, inputs.mlp_in, mlp_block(l, inputs.mlp_in, l.w_gate, l.w_up),
      [&](const std::vector<Matrix>& c) { return mlp_block(l, inputs.mlp_in, c[0], c[1]); }, options);
  const ScaleSearchResult down = search_best_scales(
      {&l.w_down}, inputs.down_in, linear(inputs.down_in, l.w_down),
      [&](const std::vector<Matrix>& c) { return linear(inputs.down_in, c[0]); }, options);

  divide(layer.attn_norm, qkv.scales);
  for (Matrix* w : {&layer.wq, &layer.wk, &layer.wv}) scale_columns(*w, qkv.scales);
  divide_columns(inputs.attn_in, qkv.scales);
  if (scale_o) {
    divide_rows(layer.wv, o.scales);
    scale_columns(layer.wo, o.scales);
    divide_columns(inputs.o_in, o.scales);
  }
  divide(layer.ffn_norm, gate_up.scales);
  for (Matrix* w : {&layer.w_gate, &layer.w_up}) scale_columns(*w, gate_up.scales);
  divide_columns(inputs.mlp_in, gate_up.scales);
  divide_rows(layer.w_up, down.scales);
  scale_columns(layer.w_down, down.scales);
  divide_columns(inputs.down_in, down.scales);

  if (options.clip) {
    const std::pair<Matrix*, const Matrix*> clipped[] = {{&layer.wv, &inputs.attn_in},   {&layer.wo, &inputs.o_in},
                                                         {&layer.w_gate, &inputs.mlp_in}, {&layer.w_up, &inputs.mlp_in},
                                                         {&layer.w_down, &inputs.down_in}};
    for (const auto& [w, x] : clipped) apply_clip(*w, search_best_clip(*w, *x, options), options.group_size);
  }
  std::vector<GroupReport> out = {report("q_proj,k_proj,v_proj", qkv)};
  out.push_back(scale_o ? report("o_proj", o) : GroupReport{"o_proj", 0, 0, 0, false});
  out.push_back(report("gate_proj,up_proj", gate_up));
  out.push_back(report("down_proj", down));
  return out;
}

}  // namespace pagoda::quantizer
