"""State: variables (trainable) and persistent tensors keep their values across calls, and
ng.assign gives them new ones.

A state tensor's value is one numpy array shared by every computation that reads or assigns
it (a training step and a prediction see the same weights). A computation reads the values
of the call's entry; its assignments take effect when the call returns: the new values are
written to a second buffer, which then becomes the value.
"""
import numpy as np

from .axes import AxisError, as_axes
from .graph import PERSISTENT, VARIABLE, Tensor, as_tensor, dtype_of


class Slot:
    """The storage of a state tensor: the current array and a spare of the same shape."""
    __slots__ = ("array", "addr", "spare", "spare_addr")

    def __init__(self, array):
        self.array = array
        self.addr = array.__array_interface__["data"][0]
        self.spare = np.empty_like(array)
        self.spare_addr = self.spare.__array_interface__["data"][0]

    def swap(self):
        self.array, self.spare = self.spare, self.array
        self.addr, self.spare_addr = self.spare_addr, self.addr

    def set(self, value):
        np.copyto(self.array, value, casting="same_kind")


def _state(kind, axes, dtype, initial_value, name):
    axes = as_axes(axes)
    dtype = dtype_of(dtype)
    v = np.asarray(initial_value if initial_value is not None else 0)
    if v.ndim and v.shape != axes.lengths:
        raise AxisError("%s %s: the initial value has shape %s and the axes (%s) have lengths %s"
                        % (kind, name or "", v.shape, ", ".join(map(str, axes)), axes.lengths))
    arr = np.empty(axes.lengths, dtype)
    with np.errstate(all="ignore"):
        arr[...] = v
    return Tensor(kind, (), axes, dtype, name=name, value=Slot(arr))


def variable(axes, dtype=np.float32, initial_value=0, name=None):
    """A trainable tensor kept across calls: initial_value is a scalar that fills it or an
    array of its shape (copied)."""
    return _state(VARIABLE, axes, dtype, initial_value, name)


def persistent_tensor(axes, dtype=np.float32, initial_value=0, name=None):
    """A tensor kept across calls that is not trained (a momentum, a counter)."""
    return _state(PERSISTENT, axes, dtype, initial_value, name)


def assign(tensor, value):
    """Gives a variable or persistent tensor a new value when the call returns (reads in the
    same call see the old one). value's axes must be among the tensor's; it is broadcast to
    them."""
    if not isinstance(tensor, Tensor) or tensor.op not in (VARIABLE, PERSISTENT):
        raise TypeError("assign: %r is not a variable or a persistent tensor" % (tensor,))
    value = as_tensor(value, tensor)
    extra = value.axes - tensor.axes
    if extra:
        raise AxisError("assign: the value %s has axes (%s) that %s lacks"
                        % (value.describe(), ", ".join(map(str, extra)), tensor.describe()))
    for a in value.axes:
        if tensor.axes.find(a.name).length != a.length:
            raise AxisError("assign: axis %s has length %d in the value and %d in %s"
                            % (a.name, a.length, tensor.axes.find(a.name).length,
                               tensor.describe()))
    if value.dtype != tensor.dtype:
        raise TypeError("assign: the value is %s and %s is %s (convert it: ng.convert)"
                        % (value.dtype, tensor.describe(), tensor.dtype))
    return Tensor("assign", (tensor, value), as_axes(()), None)


def value_of(tensor):
    """A copy of the current value of a variable or persistent tensor."""
    if not isinstance(tensor, Tensor) or tensor.op not in (VARIABLE, PERSISTENT):
        raise TypeError("%r is not a variable or a persistent tensor" % (tensor,))
    return tensor.value.array.copy()


def set_value(tensor, value):
    """Sets a variable or persistent tensor (a numpy array of its shape, or a scalar)."""
    if not isinstance(tensor, Tensor) or tensor.op not in (VARIABLE, PERSISTENT):
        raise TypeError("%r is not a variable or a persistent tensor" % (tensor,))
    v = np.asarray(value)
    if v.ndim and v.shape != tensor.axes.lengths:
        raise AxisError("set_value: %s takes shape %s, not %s"
                        % (tensor.describe(), tensor.axes.lengths, v.shape))
    tensor.value.set(v)
