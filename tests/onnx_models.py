"""Exports the whole models of the ONNX tests from PyTorch with random weights (nothing is
downloaded) into DIR/NAME/model.onnx, with an input and torch's output in
DIR/NAME/test_data_set_0/ as the ONNX backend tests lay them out (tests/onnx_cases.c runs them).
The models of DYNAMIC are also exported with a dynamic batch (dynamic_axes: the dim_param
"batch", which nest keeps symbolic) as DIR/NAME_dyn/, with a data set per batch size it lists:
one compiled kernel is checked against torch at each.

    onnx_models.py DIR [NAME ...]     (default: every model)
"""
import os
import sys
import warnings

import numpy as np
import torch
from onnx import numpy_helper

warnings.simplefilter("ignore")
torch.manual_seed(0)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
            torch.nn.ReLU(), torch.nn.Linear(128, 10))

    def forward(self, x):
        return torch.nn.functional.log_softmax(self.net(x), dim=1)


class LeNet5(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 6, 5, padding=2)
        self.c2 = torch.nn.Conv2d(6, 16, 5)
        self.f1 = torch.nn.Linear(16 * 5 * 5, 120)
        self.f2 = torch.nn.Linear(120, 84)
        self.f3 = torch.nn.Linear(84, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
        x = torch.flatten(x, 1)
        return self.f3(torch.relu(self.f2(torch.relu(self.f1(x)))))


class ViewNet(torch.nn.Module):
    """A convolution, then x.view(x.size(0), -1): PyTorch writes the batch's size as Shape,
    Gather, Unsqueeze and Concat into the Reshape's shape (nest moves the symbolic batch through
    them at import)."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(1, 4, 3)
        self.f = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = torch.relu(self.c(x))
        return self.f(y.view(y.size(0), -1))


def linear_bn():
    """Linear then BatchNorm1d (PyTorch exports Gemm, BatchNormalization: nest folds it)."""
    return torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.BatchNorm1d(16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 4))


def conv_bn():
    """Convolutions (a depthwise one), each followed by BatchNorm2d that stays a node of its own
    (exported as in training, see PRESERVE), pools and a transposed convolution: nest folds the
    normalizations into the convolutions' weights."""
    n = torch.nn
    return n.Sequential(
        n.Conv2d(3, 8, 3, padding=1), n.BatchNorm2d(8), n.ReLU(),
        n.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), n.BatchNorm2d(8), n.ReLU6(),
        n.MaxPool2d(3, stride=2, padding=1), n.Conv2d(8, 16, 1), n.BatchNorm2d(16),
        n.AvgPool2d(2, ceil_mode=True), n.ConvTranspose2d(16, 4, 3, stride=2, padding=1,
                                                           output_padding=1))


def transformer():
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2)


def models():
    import torchvision
    return {
        "mlp": (MLP, (2, 784)),
        "linear_bn": (linear_bn, (4, 32)),
        "conv_bn": (conv_bn, (2, 3, 20, 20)),
        "lenet5": (LeNet5, (2, 1, 28, 28)),
        "view_net": (ViewNet, (2, 1, 8, 8)),
        "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 224, 224)),
        "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), (1, 3, 224, 224)),
        "transformer": (transformer, (2, 16, 64)),
    }


# the models exported with a symbolic batch, and the batch sizes each is checked at (the
# large ones at fewer: a batch of 3 takes ResNet-18 through every image loop; torch refuses
# x.view(0, -1)); the transformer's attention runs with the batch second and reshapes by
# batch * heads
DYNAMIC = {"mlp": (0, 1, 7, 64), "linear_bn": (0, 1, 7, 64), "lenet5": (0, 1, 7, 64),
           "conv_bn": (0, 1, 7, 64), "view_net": (1, 7, 64), "resnet18": (0, 1, 3),
           "mobilenet_v2": (1, 2), "transformer": (0, 1, 3, 8)}


def random_statistics(model):
    """Batch norms with statistics and affine weights other than their initial 0, 1 (which
    would fold into nothing): the folding at import is then tested on real values."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model


def save(case, index, x, y):
    folder = os.path.join(case, "test_data_set_%d" % index)
    os.makedirs(folder, exist_ok=True)
    for kind, t in (("input", x), ("output", y)):
        tp = numpy_helper.from_array(t.detach().numpy().astype(np.float32))
        with open(os.path.join(folder, kind + "_0.pb"), "wb") as f:
            f.write(tp.SerializeToString())


def export(name, make, shape, out, dynamic=False):
    model = random_statistics(make()).eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        y = model(x)
    case = os.path.join(out, name + ("_dyn" if dynamic else ""))
    os.makedirs(case, exist_ok=True)
    # outside torch.no_grad(): the exporter then keeps the graph PyTorch runs
    # the exporter folds an eval model's batch norms into its convolutions itself; conv_bn keeps
    # them (the model stays in eval mode: inference BatchNormalization nodes)
    mode = torch.onnx.TrainingMode.PRESERVE if name == "conv_bn" else torch.onnx.TrainingMode.EVAL
    axes = {"input": {0: "batch"}, "output": {0: "batch"}} if dynamic else None
    torch.onnx.export(model, (x,), os.path.join(case, "model.onnx"), opset_version=13,
                      input_names=["input"], output_names=["output"], training=mode,
                      dynamic_axes=axes)
    if not dynamic:
        save(case, 0, x, y)
        return
    for i, n in enumerate(DYNAMIC[name]):
        x = torch.randn(n, *shape[1:])
        with torch.no_grad():
            save(case, i, x, model(x))


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(models())
    table = models()
    for name in names:
        export(name, *table[name], out)
        if name in DYNAMIC:
            export(name, *table[name], out, dynamic=True)


if __name__ == "__main__":
    main()
