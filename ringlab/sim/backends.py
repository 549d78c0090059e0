"""The few array operations the executor needs, for numpy arrays and for torch tensors (CPU or CUDA).

Every operand the executor touches is a ``(rows, size)`` view: a run of consecutive ranks each
holding the next chunk (a ring's diagonal), a slice of the carry row, or a gathered copy. The
adapters build those views without copying, gather and scatter by index, and name the reduction.
"""

from __future__ import annotations

import numpy as np


class NumpyBackend:
    """numpy arrays. Strided views are built with the ``ndarray`` constructor on the raw bytes of the
    contiguous array a view belongs to, about ten times cheaper than ``as_strided`` (a large ring
    makes thousands per call); views of non-contiguous arrays fall back to ``as_strided``."""

    def __init__(self):
        self._roots: dict = {}  # id(view) -> (bytes of its contiguous owner or None, byte offset of the view)

    @staticmethod
    def class_view(arr, start: int, count: int, size: int):
        """Chunks of one size class of a (world_size, numel) array as (world_size, count, size)."""
        return arr[:, start:start + count * size].reshape(arr.shape[0], count, size)

    @staticmethod
    def empty(like, shape):
        return np.empty(shape, dtype=like.dtype)

    @staticmethod
    def combine(ufunc):
        return ufunc

    @staticmethod
    def gather(view, rank, chunk):
        return view[rank, chunk]

    @staticmethod
    def scatter(view, rank, chunk, vals) -> None:
        view[rank, chunk] = vals

    @staticmethod
    def set_rows(vals, rows: np.ndarray, part) -> None:
        vals[rows] = part

    def diagonal(self, view, r0: int, k0: int, length: int):
        """Slots ``(r0 + i, k0 + i)`` for ``i < length`` of a (world_size, count, size) view, as (length, size)."""
        rank_stride, chunk_stride, elem_stride = view.strides
        owner, offset = self._root(view)
        if owner is None:
            return np.lib.stride_tricks.as_strided(view[r0, k0], shape=(length, view.shape[2]),
                                                   strides=(rank_stride + chunk_stride, elem_stride))
        return np.ndarray((length, view.shape[2]), view.dtype, owner, offset + r0 * rank_stride + k0 * chunk_stride,
                          (rank_stride + chunk_stride, elem_stride))

    def _root(self, view: np.ndarray):
        key = id(view)
        if key not in self._roots:
            owner = view if view.base is None else view.base
            ok = isinstance(owner, np.ndarray) and owner.flags.c_contiguous and view.size > 0
            offset = view.__array_interface__["data"][0] - owner.__array_interface__["data"][0] if ok else 0
            # as raw bytes: the buffer protocol refuses ml_dtypes' bfloat16
            self._roots[key] = (owner.reshape(-1).view(np.uint8).data if ok else None, offset)
        return self._roots[key]


class TorchBackend:
    """The same operations on torch tensors (strides in elements; the executor's are all positive)."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device

    @staticmethod
    def class_view(arr, start: int, count: int, size: int):
        return arr[:, start:start + count * size].view(arr.shape[0], count, size)  # view(): raises rather than copies

    def empty(self, like, shape):
        return self.torch.empty(shape, dtype=like.dtype, device=like.device)

    def combine(self, ufunc):
        """The torch function named like the numpy ufunc (add, multiply, maximum, minimum)."""
        return getattr(self.torch, ufunc.__name__)

    def _index(self, idx: np.ndarray):
        return self.torch.from_numpy(np.ascontiguousarray(idx)).to(self.device)

    def gather(self, view, rank, chunk):
        return view[self._index(rank), self._index(chunk)]

    def scatter(self, view, rank, chunk, vals) -> None:
        view[self._index(rank), self._index(chunk)] = vals

    def set_rows(self, vals, rows: np.ndarray, part) -> None:
        vals[self._index(rows)] = part

    def diagonal(self, view, r0: int, k0: int, length: int):
        offset = view.storage_offset() + r0 * view.stride(0) + k0 * view.stride(1)
        return self.torch.as_strided(view, (length, view.shape[2]), (view.stride(0) + view.stride(1), view.stride(2)),
                                     offset)


def backend_for(arr):
    """Pick the adapter from the type of ``arr`` without importing torch for numpy input."""
    if isinstance(arr, np.ndarray):
        return NumpyBackend()
    if type(arr).__module__.startswith("torch"):
        import torch

        return TorchBackend(torch, arr.device)
    raise TypeError(f"arrays must be numpy.ndarray or torch.Tensor, got {type(arr).__name__}")
