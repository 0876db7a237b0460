"""What the tests of training share: nest's state files read independently of nest (the format
of docs/api.md), and the digits of scikit-learn in the order samples/train.c documents (its
splitmix64 shuffle, reimplemented here). Used by tests/test_train.py and tests/python."""
import gzip
import struct

import numpy as np

DIGITS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
M64 = (1 << 64) - 1
TYPES = {0: np.float32, 1: np.float64, 2: np.int32, 3: np.int64, 4: np.uint8}


def read_state(path):
    """The tensors of a state file, by name."""
    data = open(path, "rb").read()
    assert data[:8] == b"NESTSTAT", "not a state file"
    version, count = struct.unpack_from("<II", data, 8)
    assert version == 1
    pos, heads = 16, []
    for _ in range(count):
        (n,) = struct.unpack_from("<H", data, pos)
        name = data[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
        etype, rank = data[pos], data[pos + 1]
        shape = struct.unpack_from("<%dq" % rank, data, pos + 2)
        pos += 2 + 8 * rank
        heads.append((name, TYPES[etype], shape))
    tensors = {}
    for name, dt, shape in heads:
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
        tensors[name] = np.frombuffer(data, dt, count=size // np.dtype(dt).itemsize,
                                      offset=pos).reshape(shape).copy()
        pos += size
    h = 0xcbf29ce484222325
    for b in data[:pos]:
        h = ((h ^ b) * 0x100000001b3) & M64
    assert struct.unpack_from("<Q", data, pos)[0] == h and pos + 8 == len(data), "bad checksum"
    return tensors


def splitmix(state):
    state = (state + 0x9e3779b97f4a7c15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return state, z ^ (z >> 31)


def shuffle(v, seed):
    for i in range(len(v) - 1, 0, -1):
        seed, z = splitmix(seed)
        j = z % (i + 1)
        v[i], v[j] = v[j], v[i]


def digits():
    """The 1797 images (pixels / 16, float32) and their labels (int64), shuffled as train.c
    does: the first 1500 train, the last 297 test."""
    d = np.loadtxt(gzip.open(DIGITS), delimiter=",")
    order = list(range(len(d)))
    shuffle(order, 12345)
    d = d[order]
    return (d[:, :64] / 16).astype(np.float32), d[:, 64].astype(np.int64)
