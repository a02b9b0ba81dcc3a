"""Independent NumPy oracles for loom-interp's lit tests.

Written from the op descriptions in LoomOps.td, not from the interpreter:
direct loops where NumPy has no one-call equivalent. Every helper works in
float64; tests compare the interpreter's f32 results with a tolerance.
"""
import json
import struct

import numpy as np


def conv2d(x, w, strides, padding, dilations, groups):
    """out[n,o,y,x] = sum in[n, g*C/G+c, y*sh+i*dh-pt, x*sw+j*dw-pl] * w[o,c,i,j]."""
    n_, c_, h, wd = x.shape
    o_, cg, kh, kw = w.shape
    pt, pl, pb, pr = padding
    sh, sw = strides
    dh, dw = dilations
    oh = (h + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
    xp = np.zeros((n_, c_, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    out = np.zeros((n_, o_, oh, ow))
    og = o_ // groups
    for o in range(o_):
        g = o // og
        for y in range(oh):
            for xx in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg,
                           y * sh:y * sh + dh * (kh - 1) + 1:dh,
                           xx * sw:xx * sw + dw * (kw - 1) + 1:dw]
                out[:, o, y, xx] = (patch * w[o]).sum(axis=(1, 2, 3))
    return out


def pool2d(x, kernel, strides, padding, kind, count_include_pad=False):
    """Max or average over windows; padded elements are skipped (max, and
    average without count_include_pad) or count as zeros."""
    n_, c_, h, w = x.shape
    pt, pl, pb, pr = padding
    oh = (h + pt + pb - kernel[0]) // strides[0] + 1
    ow = (w + pl + pr - kernel[1]) // strides[1] + 1
    out = np.zeros((n_, c_, oh, ow))
    for y in range(oh):
        for xx in range(ow):
            y0, x0 = y * strides[0] - pt, xx * strides[1] - pl
            ys = slice(max(y0, 0), min(y0 + kernel[0], h))
            xs = slice(max(x0, 0), min(x0 + kernel[1], w))
            win = x[:, :, ys, xs]
            if kind == "max":
                out[:, :, y, xx] = win.max(axis=(2, 3))
            elif count_include_pad:
                out[:, :, y, xx] = win.sum(axis=(2, 3)) / (kernel[0] * kernel[1])
            else:
                out[:, :, y, xx] = win.mean(axis=(2, 3))
    return out


M64 = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def dropout_uniform(seed, stream, index):
    """The contract of loom::interp::dropoutUniform (Interpreter.h)."""
    h = splitmix64((seed & M64) ^ ((stream * 0x9E3779B97F4A7C15) & M64))
    h = splitmix64((h + index) & M64)
    return (h >> 40) * 2.0 ** -24


def dropout(x, seed, stream, ratio):
    ratio = float(np.float32(ratio))
    flat = x.astype(np.float64).ravel()
    out = np.array([0.0 if dropout_uniform(seed, stream, i) < ratio
                    else v * (1.0 / (1.0 - ratio)) for i, v in enumerate(flat)])
    return out.reshape(x.shape)


def write_safetensors(path, tensors):
    """tensors: name -> numpy array (float32/float64/int64)."""
    names = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
             np.dtype(np.int64): "I64", np.dtype(np.float16): "F16"}
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def check(name, got, want, rtol=1e-5, atol=1e-6):
    """Prints 'OK name' or a 'BAD' line with the largest difference."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        print("BAD %s: shape %s, expected %s" % (name, got.shape, want.shape))
    elif np.allclose(got.astype(np.float64), want.astype(np.float64),
                     rtol=rtol, atol=atol, equal_nan=True):
        print("OK %s" % name)
    else:
        print("BAD %s: max error %g\n got %s\n want %s" % (
            name, np.abs(got - want).max(), got, want))


def conv2d_input_grad(dy, w, x_shape, *conv_args):
    """J^T dy, J the Jacobian of conv2d in its input, built column by column
    from conv2d itself (so it is the true adjoint, not a second formula)."""
    n = int(np.prod(x_shape))
    cols = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = 1.0
        cols.append(conv2d(e.reshape(x_shape), w, *conv_args).ravel())
    return (np.stack(cols, axis=1).T @ dy.ravel()).reshape(x_shape)


def conv2d_filter_grad(x, dy, w_shape, *conv_args):
    """J^T dy, J the Jacobian of conv2d in its filter."""
    n = int(np.prod(w_shape))
    cols = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = 1.0
        cols.append(conv2d(x, e.reshape(w_shape), *conv_args).ravel())
    return (np.stack(cols, axis=1).T @ dy.ravel()).reshape(w_shape)


def pool2d_argmax(x, kernel, strides, padding):
    """Flat index into x of each window's maximum, the first (row-major in
    the window) among equal maxima."""
    n_, c_, h, w = x.shape
    pt, pl, pb, pr = padding
    oh = (h + pt + pb - kernel[0]) // strides[0] + 1
    ow = (w + pl + pr - kernel[1]) // strides[1] + 1
    out = np.zeros((n_, c_, oh, ow), dtype=np.int64)
    for n in range(n_):
        for c in range(c_):
            for y in range(oh):
                for xx in range(ow):
                    best = None
                    for i in range(kernel[0]):
                        for j in range(kernel[1]):
                            iy, ix = y * strides[0] + i - pt, xx * strides[1] + j - pl
                            if 0 <= iy < h and 0 <= ix < w and (
                                    best is None or x[n, c, iy, ix] > x[best]):
                                best = (n, c, iy, ix)
                    out[n, c, y, xx] = np.ravel_multi_index(best, x.shape)
    return out


def linear_cross_entropy(x, w, labels, reduction, ignore=None, transpose_w=True):
    """loom.linear_cross_entropy and its gradient in float64: returns
    (loss, lse, grad) where grad(dloss) gives (dx, dw)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    logits = x @ (w.T if transpose_w else w)
    m = logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(axis=1)) + m[:, 0]
    labels = np.asarray(labels, np.int64)
    valid = np.ones(len(labels), bool) if ignore is None else labels != ignore
    safe = np.where(valid, labels, 0)
    rows = np.where(valid, lse - logits[np.arange(len(labels)), safe], 0.0)
    count = max(int(valid.sum()), 1)
    loss = {"none": rows, "sum": rows.sum(), "mean": rows.sum() / count}[reduction]

    def grad(dloss):
        dloss = np.asarray(dloss, np.float64)
        if reduction == "none":
            weight = dloss
        else:
            weight = np.full(len(labels), float(dloss) / (
                count if reduction == "mean" else 1))
        weight = np.where(valid, weight, 0.0)
        d = np.exp(logits - lse[:, None])
        d[np.arange(len(labels)), safe] -= valid
        d *= weight[:, None]
        if transpose_w:
            return d @ w, d.T @ x
        return d @ w.T, x.T @ d

    return loss, lse, grad
