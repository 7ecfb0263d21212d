// onnx/ops_recurrent.cpp - RNN, GRU and LSTM, unrolled over the sequence while importing.
//
// kiln graphs are static, and so is an ONNX recurrence's length (X's first dim): each time
// step becomes the gate arithmetic of the spec on kiln tensors. The input projection of
// every step is one matmul up front ([seq, batch, input] x [input, gates]); each step then
// adds its hidden state's projection, so a step costs one small matmul and a fused kernel of
// gate arithmetic.
#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

// An activation of `activations`, with its alpha and beta (consumed from the attribute lists
// in order, by the functions that take them; ONNX's defaults otherwise).
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

Tensor activate(NodeContext& c, const Activation& a, const Tensor& x) {
  auto k = [&](double v) { return c.scalar_like(v, x); };
  const std::string& f = a.name;
  if (f == "relu") return x.relu();
  if (f == "tanh") return x.tanh();
  if (f == "sigmoid") return x.sigmoid();
  if (f == "affine") return x * k(a.alpha) + k(a.beta);
  if (f == "leakyrelu") return where(x < 0, x * k(a.alpha), x);
  if (f == "thresholdedrelu") return where(x.gt(k(a.alpha)), x, k(0));
  if (f == "scaledtanh") return (x * k(a.beta)).tanh() * k(a.alpha);
  if (f == "hardsigmoid") return (x * k(a.alpha) + k(a.beta)).maximum(k(0)).minimum(k(1));
  if (f == "elu") return where(x < 0, (x.exp() - k(1)) * k(a.alpha), x);
  if (f == "softsign") return x / (x.abs() + k(1));
  if (f == "softplus") return (x.exp() + k(1)).log();
  c.unsupported(fmt::format("activation '{}' is not supported", a.name));
}

// What the three ops share: X as [seq, batch, input], the direction(s), the activations per
// direction, clip, the initial state and the sequence lengths.
struct Recurrence {
  Tensor x;
  int64_t seq = 0, batch = 0, hidden = 0, dirs = 1;
  bool batch_first = false;
  std::vector<bool> reverse;                     // per direction
  std::vector<std::vector<Activation>> act;      // per direction, `per_direction` each
  std::optional<double> clip;
  std::optional<Tensor> lengths;                 // [batch, 1] i64
};

Recurrence recurrence(NodeContext& c, std::vector<std::string> defaults) {
  Recurrence r;
  r.x = c.input(0);
  if (!is_float(r.x.dtype())) c.invalid(fmt::format("X is {}, not a float tensor", dtype_name(r.x.dtype())));
  if (r.x.rank() != 3) c.invalid(fmt::format("X has rank {}, not 3", r.x.rank()));
  r.batch_first = c.attr_int("layout", 0) != 0;
  if (r.batch_first) r.x = r.x.transpose(0, 1);
  r.seq = r.x.size(0);
  r.batch = r.x.size(1);
  r.hidden = c.attr_int("hidden_size");
  const std::string direction = c.attr_string("direction", "forward");
  if (direction == "forward" || direction == "reverse") r.reverse = {direction == "reverse"};
  else if (direction == "bidirectional") r.reverse = {false, true};
  else c.invalid(fmt::format("direction '{}' is none of forward, reverse, bidirectional", direction));
  r.dirs = static_cast<int64_t>(r.reverse.size());
  std::vector<std::string> names = c.attr_strings("activations");
  const size_t per = defaults.size();
  if (names.empty())
    for (int64_t d = 0; d < r.dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() != per * static_cast<size_t>(r.dirs))
    c.invalid(fmt::format("it lists {} activations, not {} per direction", names.size(), per));
  const std::vector<double> alphas = c.attr_floats("activation_alpha"), betas = c.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  for (int64_t d = 0; d < r.dirs; ++d) {
    r.act.emplace_back();
    for (size_t i = 0; i < per; ++i) {
      Activation a;
      for (char ch : names[static_cast<size_t>(d) * per + i]) a.name += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      // The defaults of the ONNX ops of the same names.
      static const std::pair<const char*, std::pair<double, double>> kTakes[] = {
          {"affine", {1.0, 0.0}}, {"leakyrelu", {0.01, 0.0}}, {"thresholdedrelu", {1.0, 0.0}},
          {"scaledtanh", {1.0, 1.0}}, {"hardsigmoid", {0.2, 0.5}}, {"elu", {1.0, 0.0}}};
      for (const auto& [name, ab] : kTakes) {
        if (a.name != name) continue;
        a.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : ab.first;
        const bool takes_beta = a.name == "affine" || a.name == "scaledtanh" || a.name == "hardsigmoid";
        if (takes_beta) a.beta = next_beta < betas.size() ? betas[next_beta++] : ab.second;
      }
      r.act.back().push_back(a);
    }
  }
  if (c.has_attr("clip")) r.clip = c.attr_float("clip");
  if (c.has_input(4)) r.lengths = c.input(4).to(DType::I64).reshape({r.batch, 1});
  return r;
}

// Weights of direction `d` as [in, gates * hidden] (transposed: x @ w), from [dirs, G*H, in].
Tensor per_direction(const Tensor& w, int64_t d) { return w.slice(0, d, d + 1).squeeze(0).transpose(0, 1); }

// Columns [g*H, (g+1)*H) of a [.., G*H] tensor: gate g.
Tensor gate(const Tensor& t, int64_t g, int64_t h) { return t.slice(-1, g * h, (g + 1) * h); }

// An initial state [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]) for direction d,
// or zeros.
Tensor initial(NodeContext& c, const Recurrence& r, size_t input, int64_t d) {
  if (!c.has_input(input)) return kiln::zeros({r.batch, r.hidden}, r.x.dtype(), c.device());
  Tensor s = c.input(input);
  if (r.batch_first) s = s.transpose(0, 1);
  return s.slice(0, d, d + 1).squeeze(0);
}

// Step s of a direction: where batch entry b's sequence has ended (s >= sequence_lens[b])
// the state stays and the output is 0.
struct Step {
  Tensor h, y;
};
Step masked(NodeContext& c, const Recurrence& r, int64_t s, const Tensor& fresh, const Tensor& old) {
  if (!r.lengths) return {fresh, fresh};
  const Tensor live = r.lengths->gt(c.scalar(static_cast<double>(s), DType::I64));
  return {where(live, fresh, old), where(live, fresh, c.scalar_like(0, fresh))};
}

// What step s of direction d reads of `xw` [seq, batch, G*H]: time s forward; reversed, time
// seq - 1 - s, or with sequence lengths each entry's own last - s (a gather along time; an
// entry already ended reads anything, its step is masked).
Tensor step_input(const Recurrence& r, int64_t d, const Tensor& xw, int64_t s) {
  auto at = [&](int64_t t) { return xw.slice(0, t, t + 1).squeeze(0); };
  if (!r.reverse[static_cast<size_t>(d)]) return at(s);
  if (!r.lengths) return at(r.seq - 1 - s);
  const Tensor t = (*r.lengths - (s + 1)).maximum(kiln::zeros({}, DType::I64, xw.device()));
  return xw.gather(0, t.reshape({1, r.batch, 1}).expand({1, r.batch, xw.size(-1)})).squeeze(0);
}

// A direction's outputs [seq, batch, hidden] in time order from its steps' (s = 0, 1, ...).
Tensor in_time_order(const Recurrence& r, int64_t d, const std::vector<Tensor>& steps) {
  std::vector<Tensor> ordered;
  for (const Tensor& y : steps) ordered.push_back(y.unsqueeze(0));
  const bool reverse = r.reverse[static_cast<size_t>(d)];
  if (reverse && !r.lengths) std::reverse(ordered.begin(), ordered.end());
  Tensor y = kiln::cat(ordered, 0);
  if (!reverse || !r.lengths) return y;
  // Time t of entry b is step lengths[b] - 1 - t; past its length, 0.
  const Tensor t = kiln::arange(r.seq, DType::I64, y.device()).reshape({r.seq, 1, 1});
  const Tensor step = r.lengths->reshape({1, r.batch, 1}) - t - 1;
  const Tensor picked = y.gather(0, step.maximum(kiln::zeros({}, DType::I64, y.device())).expand(dims_of(y.shape())));
  return where(step >= 0, picked, kiln::zeros({}, y.dtype(), y.device()));
}

// Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]) and Y_h, Y_c [dirs,
// batch, hidden] (layout 1: [batch, dirs, hidden]).
std::vector<Tensor> outputs(const Recurrence& r, const std::vector<Tensor>& ys,
                            const std::vector<std::vector<Tensor>>& finals) {
  std::vector<Tensor> dirs;
  for (const Tensor& y : ys) dirs.push_back(y.unsqueeze(1));  // [seq, 1, batch, hidden]
  Tensor y = kiln::cat(dirs, 1);
  if (r.batch_first) y = y.permute({2, 0, 1, 3});
  std::vector<Tensor> out{y};
  for (const auto& f : finals) {
    std::vector<Tensor> per;
    for (const Tensor& s : f) per.push_back(s.unsqueeze(0));
    Tensor last = kiln::cat(per, 0);
    if (r.batch_first) last = last.transpose(0, 1);
    out.push_back(last);
  }
  return out;
}

// The gate inputs of step t: the input projection, biased, plus the state's projection.
struct Projections {
  Tensor xw;  // [seq, batch, G*H]: x @ W^T + Wb (+ Rb where `rb_in_x`)
  Tensor r;   // [H, G*H]
};
Projections project(NodeContext& c, const Recurrence& r, int64_t d, int64_t gates, bool rb_in_x, Tensor* rb) {
  const int64_t gh = gates * r.hidden;
  Projections p{r.x.matmul(per_direction(c.input(1), d)), per_direction(c.input(2), d)};
  if (c.has_input(3)) {
    const Tensor b = c.input(3).slice(0, d, d + 1).reshape({2 * gh});
    const Tensor wb = b.slice(0, 0, gh), rbias = b.slice(0, gh, 2 * gh);
    p.xw = p.xw + (rb_in_x ? wb + rbias : wb);
    if (rb) *rb = rbias;
  } else if (rb) {
    *rb = kiln::zeros({gh}, r.x.dtype(), c.device());
  }
  return p;
}

Tensor clipped(NodeContext& c, const Recurrence& r, const Tensor& x) {
  if (!r.clip) return x;
  return x.maximum(c.scalar_like(-*r.clip, x)).minimum(c.scalar_like(*r.clip, x));
}

// RNN and GRU: one state per direction. `make_step(d)` gives direction d's step, which maps
// (step s, state h) to the fresh state.
template <class MakeStep>
std::vector<Tensor> run_one_state(NodeContext& c, const Recurrence& r, MakeStep make_step) {
  std::vector<Tensor> ys;
  std::vector<std::vector<Tensor>> hs(1);
  for (int64_t d = 0; d < r.dirs; ++d) {
    const auto step = make_step(d);
    Tensor h = initial(c, r, 5, d);
    std::vector<Tensor> y;
    for (int64_t s = 0; s < r.seq; ++s) {
      const Step st = masked(c, r, s, step(s, h), h);
      h = st.h;
      y.push_back(st.y);
    }
    ys.push_back(in_time_order(r, d, y));
    hs[0].push_back(h);
  }
  return outputs(r, ys, hs);
}

std::vector<Tensor> RNN(NodeContext& c) {
  const Recurrence r = recurrence(c, {"Tanh"});
  return run_one_state(c, r, [&](int64_t d) {
    const Projections p = project(c, r, d, 1, /*rb_in_x=*/true, nullptr);
    const Activation f = r.act[static_cast<size_t>(d)][0];
    return [&c, &r, p, d, f](int64_t s, const Tensor& h) {
      return activate(c, f, clipped(c, r, step_input(r, d, p.xw, s) + h.matmul(p.r)));
    };
  });
}

std::vector<Tensor> GRU(NodeContext& c) {
  const Recurrence r = recurrence(c, {"Sigmoid", "Tanh"});
  const bool linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
  const int64_t H = r.hidden;
  return run_one_state(c, r, [&](int64_t d) {
    // z and r take both biases up front; h~ takes Rb inside (before or after the reset).
    Tensor rb;
    const Projections p = project(c, r, d, 3, /*rb_in_x=*/false, &rb);
    const Tensor rb_zr = rb.slice(0, 0, 2 * H), rb_h = rb.slice(0, 2 * H, 3 * H);
    const Tensor rz = p.r.slice(1, 0, 2 * H), rh = p.r.slice(1, 2 * H, 3 * H);
    const std::vector<Activation> act = r.act[static_cast<size_t>(d)];
    return [&c, &r, p, d, H, rb_zr, rb_h, rz, rh, act, linear_before_reset](int64_t s, const Tensor& h) {
      const Tensor x = step_input(r, d, p.xw, s);
      const Tensor zr = h.matmul(rz) + rb_zr + x.slice(1, 0, 2 * H);
      const Tensor z = activate(c, act[0], clipped(c, r, gate(zr, 0, H)));
      const Tensor reset = activate(c, act[0], clipped(c, r, gate(zr, 1, H)));
      const Tensor hx = gate(x, 2, H);
      const Tensor pre = linear_before_reset ? hx + reset * (h.matmul(rh) + rb_h) : hx + (reset * h).matmul(rh) + rb_h;
      const Tensor candidate = activate(c, act[1], clipped(c, r, pre));
      return (c.scalar_like(1, z) - z) * candidate + z * h;
    };
  });
}

std::vector<Tensor> LSTM(NodeContext& c) {
  const Recurrence r = recurrence(c, {"Sigmoid", "Tanh", "Tanh"});
  const bool couple = c.attr_int("input_forget", 0) != 0;
  const int64_t H = r.hidden;
  std::vector<Tensor> ys;
  std::vector<std::vector<Tensor>> finals(2);
  for (int64_t d = 0; d < r.dirs; ++d) {
    const Projections p = project(c, r, d, 4, /*rb_in_x=*/true, nullptr);
    const auto& act = r.act[static_cast<size_t>(d)];
    std::optional<Tensor> peep;
    if (c.has_input(7)) peep = c.input(7).slice(0, d, d + 1).reshape({3 * H});
    Tensor h = initial(c, r, 5, d), cell = initial(c, r, 6, d);
    std::vector<Tensor> y;
    for (int64_t s = 0; s < r.seq; ++s) {
      const Tensor g = step_input(r, d, p.xw, s) + h.matmul(p.r);  // gates i, o, f, c
      Tensor pi = gate(g, 0, H), pf = gate(g, 2, H);
      if (peep) {
        pi = pi + peep->slice(0, 0, H) * cell;
        pf = pf + peep->slice(0, 2 * H, 3 * H) * cell;
      }
      const Tensor i = activate(c, act[0], clipped(c, r, pi));
      const Tensor f = couple ? c.scalar_like(1, i) - i : activate(c, act[0], clipped(c, r, pf));
      const Tensor candidate = activate(c, act[1], clipped(c, r, gate(g, 3, H)));
      const Tensor fresh_cell = f * cell + i * candidate;
      Tensor po = gate(g, 1, H);
      if (peep) po = po + peep->slice(0, H, 2 * H) * fresh_cell;
      const Tensor o = activate(c, act[0], clipped(c, r, po));
      const Tensor fresh = o * activate(c, act[2], fresh_cell);
      const Step st = masked(c, r, s, fresh, h);
      cell = masked(c, r, s, fresh_cell, cell).h;
      h = st.h;
      y.push_back(st.y);
    }
    ys.push_back(in_time_order(r, d, y));
    finals[0].push_back(h);
    finals[1].push_back(cell);
  }
  return outputs(r, ys, finals);
}

constexpr std::string_view kRecurrent[] = {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                                           "hidden_size", "layout"};
constexpr std::string_view kGru[] = {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                                     "hidden_size", "layout", "linear_before_reset"};
constexpr std::string_view kLstm[] = {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                                      "hidden_size", "input_forget", "layout"};

}  // namespace

const ConverterRow kRecurrentRows[] = {
    {"RNN", 7, 22, RNN, kRecurrent},
    {"GRU", 7, 22, GRU, kGru},
    {"LSTM", 7, 22, LSTM, kLstm},
};
const std::span<const ConverterRow> recurrent_rows = kRecurrentRows;

}  // namespace kiln::onnx::detail
