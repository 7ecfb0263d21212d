// examples/finetune_onnx.cpp - an imported ONNX model's weights trained with kiln's gradients.
//
//   build/bin/example_finetune_onnx MODEL.onnx [device] [input shape, default 4,3,64,64]
//
// The model is imported (kiln::onnx::load), and its weights, the graph's trailing
// parameters, become tensors that require gradients; the graph is then called on them like
// any tensor code (kiln::call), so every op the importer mapped is differentiated by the
// rules of the kiln ops it became. The task: fit a batch of random images to random labels
// (a model that can be trained memorizes them), AdamW, 40 steps of one plan each. The tests run it on the reduced ResNet-18 that
// PyTorch's dynamo exporter wrote from timm's code (tests/onnx/real_models/resnet18-dynamo:
// convolutions, max pooling, a mean, a Gemm). Exits 1 unless the loss falls below a tenth of
// where it started.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/kiln.h"

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc < 2) {
    std::fprintf(stderr, "usage: example_finetune_onnx MODEL.onnx [device]\n");
    return 2;
  }
  const Device device = Device::parse(argc > 2 ? argv[2] : "cpu");
  std::vector<int64_t> dims;
  for (std::string_view rest = argc > 3 ? argv[3] : "4,3,64,64"; !rest.empty();) {
    const size_t comma = rest.find(',');
    dims.push_back(std::stoll(std::string(rest.substr(0, comma))));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  onnx::ImportOptions options;
  options.all_float_weights = true;  // the small biases train too
  const auto names = onnx::model_input_names(argv[1]);
  if (!names) throw Error(names.error());
  if (names->size() != 1) {
    std::fprintf(stderr, "this example takes a model of one input (images) and one output (logits)\n");
    return 2;
  }
  options.input_shapes[names->front()] = Shape(dims);
  const onnx::Model model = onnx::load(argv[1], options);
  const TensorType in = model.graph.type(model.graph.inputs()[0]);
  const TensorType out = model.graph.type(model.graph.outputs()[0]);
  if (model.graph.outputs().size() != 1 || out.shape.rank() != 2) {
    std::fprintf(stderr, "this example takes a model of one output, logits [batch, classes]\n");
    return 2;
  }
  const int64_t batch = out.shape[0], classes = out.shape[1];

  // The weights: copies on the device (the optimizer replaces them), as parameters.
  std::vector<Tensor> weights;
  for (const auto& w : model.weights) {
    Tensor t = from_host(*w, device);
    if (is_float(t.dtype())) t.requires_grad_();
    weights.push_back(t);
  }
  std::vector<Tensor*> params;
  for (Tensor& w : weights)
    if (w.requires_grad()) params.push_back(&w);

  const Tensor images = randn(in.shape, 100, in.dtype, device).eval();
  std::vector<int64_t> label_values;
  for (int64_t i = 0; i < batch; ++i) label_values.push_back((3 * i + 1) % classes);
  const Tensor labels = from_vector(label_values, {batch}, device);
  train::AdamW opt(params, {.lr = 3e-3, .weight_decay = 0});
  float first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    std::vector<Tensor> args{images};
    args.insert(args.end(), weights.begin(), weights.end());
    const Tensor loss = train::cross_entropy(call(model.graph, args)[0], labels);
    loss.backward();
    opt.step();
    opt.zero_grad();
    kiln::sync();
    last = loss.item<float>();
    if (step == 0) first = last;
    if (step % 5 == 0 || step == 39) std::printf("step %2d  loss %.4f\n", step, last);
  }
  std::printf("%s: %zu weight tensors trained, %zu parameters in all; loss %.4f -> %.4f on %s\n", argv[1], params.size(),
              [&] {
                size_t n = 0;
                for (Tensor* p : params) n += static_cast<size_t>(p->numel());
                return n;
              }(),
              first, last, device.str().c_str());
  return last < first / 10 ? 0 : 1;
}
