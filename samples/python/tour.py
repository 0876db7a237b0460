# %% [markdown]
# # nest from Python: a tour
#
# Run it from the repository after `make` (or `make demo`), as a script or cell by cell
# (the `# %%` markers are cells for Jupyter and editors that read them):
#
#     PYTHONPATH=python /usr/bin/python3 samples/python/tour.py
#
# Tensors have named axes; operations match axes by name, and a computation is compiled to C
# once and then called with numpy arrays. docs/python.md is the guide.

# %%
import numpy as np

import nest as ng

rng = np.random.default_rng(0)

# %% [markdown]
# ## The L2 distance of a - b
#
# The seed's example: with numpy, `t = a - b; np.dot(t, t)` writes `t` to memory and reads it
# back. nest fuses the subtraction into the reduction: one loop, no temporary.

# %%
N = ng.make_axis(length=1 << 20, name="N")
a = ng.placeholder([N], name="a")
b = ng.placeholder([N], name="b")
d = (a - b).named("d")  # names appear in the generated C
l2 = ng.computation(ng.dot(d, d), a, b, name="l2")

x = rng.standard_normal(1 << 20).astype(np.float32)
y = rng.standard_normal(1 << 20).astype(np.float32)
print("l2:", float(l2(x, y)), " numpy:", float(np.dot(x - y, x - y)))
print("compiled in %.0f ms%s" % (l2.compile_ms, " (from the cache)" if l2.cache_hit else ""))

# %% [markdown]
# ## Axes are matched by name
#
# A tensor with axes (C, H, W, N) minus one with axes (W, H): no reshape, no transpose; the
# result has rank 4.

# %%
C, H, W, B = (ng.make_axis(length=n, name=s) for n, s in ((3, "C"), (4, "H"), (5, "W"), (2, "N")))
images = ng.placeholder([C, H, W, B], name="images")
mask = ng.placeholder([W, H], name="mask")
diff = images - mask
print("axes of images - mask:", diff.axes)
f = ng.computation(diff, images, mask, name="masked")
im = rng.standard_normal((3, 4, 5, 2)).astype(np.float32)
mk = rng.standard_normal((5, 4)).astype(np.float32)
print("largest difference from numpy:",
      float(np.abs(f(im, mk) - (im - mk.T[None, :, :, None])).max()))

# %% [markdown]
# ## A dense layer
#
# `ng.dot` contracts the axes its operands share: features F with weights (F, K) gives (batch,
# K), whatever the order of the axes. The bias (K) broadcasts by name.

# %%
Bt = ng.make_axis(length=64, name="batch")
F = ng.make_axis(length=256, name="F")
K = ng.make_axis(length=128, name="K")
xin = ng.placeholder([Bt, F], name="x")
w = ng.placeholder([K, F], name="w")  # stored (out, in) as in PyTorch: no transpose needed
bias = ng.placeholder([K], name="bias")
h = ng.relu(ng.dot(xin, w) + bias)
dense = ng.computation(h, xin, w, bias, name="dense")
xv = rng.standard_normal((64, 256)).astype(np.float32)
wv = rng.standard_normal((128, 256)).astype(np.float32) / 16
bv = rng.standard_normal(128).astype(np.float32)
print("dense: axes", h.axes, " largest difference from numpy:",
      float(np.abs(dense(xv, wv, bv) - np.maximum(xv @ wv.T + bv, 0)).max()))

# %% [markdown]
# ## State across calls
#
# A persistent tensor keeps its value between calls; `ng.assign` gives it a new one when the
# call returns.

# %%
total = ng.persistent_tensor([K], initial_value=0.0, name="total")
batch_sum = ng.sum(h, reduction_axes=[Bt])
accumulate = ng.computation([batch_sum, ng.assign(total, total + batch_sum)], xin, w, bias,
                            name="accumulate")
for _ in range(3):
    accumulate(xv, wv, bv)
print("after 3 calls, total[:4] =", ng.value_of(total)[:4],
      " (3 x the batch sum:", (3 * np.maximum(xv @ wv.T + bv, 0).sum(axis=0))[:4], ")")

# %% [markdown]
# ## The generated C
#
# `c_source()` is the C that nest compiled; `save(path)` builds it ahead of time into a
# shared object and a header that need nothing of nest.

# %%
print(l2.c_source().split("\n\n")[1][:900])
