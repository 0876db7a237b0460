"""Named axes: a tensor's dimensions are Axis objects (a name and a length), kept in an Axes,
an ordered set. Operations match axes by name, not by position: a tensor with axes (C, H, W, N)
minus one with axes (W, H) has rank 4. Two axes with the same name and different lengths in
one operation are an error naming both.

An axis made with a name and no length is symbolic: its length is a Symbolic (one of the C
library's named dims, nest_named_dim), taken from the arrays when a computation is called.
"""
import itertools
import numbers

_counter = itertools.count(1)


class AxisError(ValueError):
    """Axes that do not fit an operation: a name with two lengths, a missing or repeated
    axis."""


class Symbolic:
    """The length of a symbolic axis: the C library's named dim `name`, known only when a
    computation is called (from the arrays' shapes). Lengths compare equal when their names
    are; arithmetic and order on one are an AxisError, since it has no value yet."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Symbolic) and other.name == self.name

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((Symbolic, self.name))

    def __repr__(self):
        return self.name

    def _refuse(self, *args):
        raise AxisError("axis %s is symbolic: its length is known only when the computation is "
                        "called, and this operation needs it (symbolic axes go through "
                        "element-wise ops, reductions and ng.dot)" % self.name)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = __mod__ = __rmod__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = __int__ = __index__ = __float__ = __bool__ = _refuse


def length_text(n):
    """'length 5', or 'a symbolic length', for messages."""
    return "a symbolic length" if isinstance(n, Symbolic) else "length %d" % n


class Axis:
    """A dimension: `name` and `length` (an int, or a Symbolic for a symbolic axis). Axes are
    equal when their names and lengths are."""
    __slots__ = ("name", "length")

    def __init__(self, length, name=None):
        if isinstance(length, Symbolic):
            if name is None:
                name = length.name
            if not isinstance(name, str) or not name:
                raise AxisError("an axis name must be a non-empty string, not %r" % (name,))
            self.name, self.length = name, length
            return
        if isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 0:
            raise AxisError("axis %s: the length must be an integer >= 0, not %r"
                            % (name if name is not None else "", length))
        if name is None:
            name = "A%d" % next(_counter)
        if not isinstance(name, str) or not name:
            raise AxisError("an axis name must be a non-empty string, not %r" % (name,))
        self.name = name
        self.length = int(length)

    def __eq__(self, other):
        return (isinstance(other, Axis) and self.name == other.name
                and self.length == other.length)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self.name, self.length))

    def __repr__(self):
        return "Axis(%s)" % self

    def __str__(self):
        if isinstance(self.length, Symbolic) and self.length.name == self.name:
            return self.name  # symbolic
        return "%s=%s" % (self.name, self.length)

    @property
    def symbolic(self):
        """Whether the length is known only when a computation is called."""
        return isinstance(self.length, Symbolic)

    def named(self, name):
        """An axis of the same length under another name."""
        return Axis(self.length, name)


def make_axis(length=None, name=None):
    """A new axis: make_axis(length=32, name="N"). Without a name, a unique one is made.
    make_axis(name="N") without a length is a symbolic axis: its length is taken from the
    arrays each time a computation is called (one compiled kernel serves every length)."""
    if length is None:
        if name is None:
            raise AxisError("make_axis: give the length (make_axis(length=32, name='N')), or a "
                            "name alone for a symbolic axis (make_axis(name='N'))")
        if not isinstance(name, str) or not name:
            raise AxisError("an axis name must be a non-empty string, not %r" % (name,))
        return Axis(Symbolic(name), name)
    return Axis(length, name)


class Axes:
    """An ordered set of axes with distinct names; immutable. `axes + other` is the union in
    order (a's axes, then other's new ones), `axes - other` the difference, `axes & other`
    the intersection in axes' order; other may be an Axis, an Axes or a list of axes."""
    __slots__ = ("_axes", "_index")

    def __init__(self, axes=()):
        if isinstance(axes, Axes):
            axes = axes._axes
        elif isinstance(axes, Axis):
            axes = (axes,)
        axes = tuple(axes)
        index = {}
        for i, a in enumerate(axes):
            if not isinstance(a, Axis):
                raise AxisError("axes must be Axis objects (ng.make_axis), not %r" % (a,))
            if a.name in index:
                raise AxisError("axis %s appears twice in (%s)"
                                % (a.name, ", ".join(str(x) for x in axes)))
            index[a.name] = i
        self._axes = axes
        self._index = index

    # sequence protocol
    def __len__(self):
        return len(self._axes)

    def __iter__(self):
        return iter(self._axes)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Axes(self._axes[i])
        return self._axes[i]

    def __contains__(self, axis):
        if isinstance(axis, str):
            return axis in self._index
        i = self._index.get(getattr(axis, "name", None))
        return i is not None and self._axes[i] == axis

    def __eq__(self, other):
        try:
            return self._axes == as_axes(other)._axes
        except AxisError:
            return False

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._axes)

    def __repr__(self):
        return "Axes(%s)" % ", ".join(str(a) for a in self._axes)

    @property
    def names(self):
        return tuple(a.name for a in self._axes)

    @property
    def lengths(self):
        return tuple(a.length for a in self._axes)

    @property
    def size(self):
        """The number of elements: an int, or the Symbolic length of a single symbolic axis
        (a product with one is refused: AxisError)."""
        if len(self._axes) == 1:
            return self._axes[0].length
        n = 1
        for a in self._axes:
            n *= a.length
        return n

    def find(self, name):
        """The axis called `name` (or the axis with the name of `name`), or None."""
        name = getattr(name, "name", name)
        i = self._index.get(name)
        return None if i is None else self._axes[i]

    def index(self, axis):
        """The position of an axis (given by Axis or by name); AxisError if it is absent."""
        name = getattr(axis, "name", axis)
        i = self._index.get(name)
        if i is None or (isinstance(axis, Axis) and self._axes[i] != axis):
            raise AxisError("axis %s is not among (%s)" % (axis, ", ".join(map(str, self))))
        return i

    def __add__(self, other):
        other = as_axes(other)
        check_compatible(self, other)
        return Axes(self._axes + tuple(a for a in other if a.name not in self._index))

    def __sub__(self, other):
        other = as_axes(other)
        return Axes(a for a in self._axes if a.name not in other._index)

    def __and__(self, other):
        other = as_axes(other)
        return Axes(a for a in self._axes if a.name in other._index)


def as_axes(axes):
    """An Axes from an Axes, an Axis, or a sequence of axes."""
    if isinstance(axes, Axes):
        return axes
    if axes is None:
        return Axes()
    return Axes(axes)


def make_axes(axes=()):
    """An Axes from a list of axes: make_axes([C, H, W, N])."""
    return as_axes(axes)


def check_compatible(*groups, what="operands"):
    """Raises AxisError when two of the axes share a name with different lengths."""
    seen = {}
    for g in groups:
        for a in g:
            b = seen.setdefault(a.name, a)
            if b.length != a.length:
                raise AxisError("%s: axis %s has %s in one operand and %s in another "
                                "(same name, different lengths: %r and %r)"
                                % (what, a.name, length_text(b.length), length_text(a.length),
                                   b, a))
