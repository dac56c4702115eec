"""Turning labels and weights into the encoded targets the solvers train on.

Classification is one-vs-rest: a binary problem has one column of ±1 labels
(``+1`` for ``classes_[1]``); with more classes, column ``k`` is ``+1`` where
the label is ``classes_[k]``.  Regression targets are centred by their weighted
mean (the offset goes back into ``intercept_``), so that the regularised
intercept need not carry the targets' mean.

The encoder is a small picklable object: the same code encodes in-memory input
on the client and dask blocks on the workers.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["TargetEncoder"]


@dataclass(frozen=True)
class TargetEncoder:
    """Encode one block of labels (or targets) and sample weights.

    Attributes
    ----------
    classes : ndarray or None
        Sorted class labels; None for regression.
    class_weight : ndarray or None
        Weight per class, aligned with ``classes``.
    offset : ndarray or None
        Per-target offset subtracted from regression targets.
    n_targets : int
        Columns of the encoded ``Y``.
    """

    classes: object = None
    class_weight: object = None
    offset: object = None
    n_targets: int = 1

    @property
    def is_classifier(self):
        """Whether labels are classes (else real targets)."""
        return self.classes is not None

    def encode(self, y, sample_weight=None):
        """Return ``(Y, sample_weight)`` as float64 arrays for one block.

        Raises
        ------
        ValueError
            On non-finite targets or weights, negative weights, or labels that
            are not in ``classes``.
        """
        n = y.shape[0]
        sw = np.ones(n) if sample_weight is None else np.asarray(
            sample_weight, dtype=np.float64).reshape(-1)
        if sw.shape[0] != n:
            raise ValueError(
                f"sample_weight has {sw.shape[0]} rows but y has {n}")
        if not np.all(np.isfinite(sw)):
            raise ValueError("sample_weight contains NaN or infinity")
        if np.any(sw < 0):
            raise ValueError("sample_weight must be non-negative")
        if not self.is_classifier:
            Y = np.asarray(y, dtype=np.float64).reshape(n, -1)
            if not np.all(np.isfinite(Y)):
                raise ValueError("y contains NaN or infinity")
            if self.offset is not None:
                Y = Y - self.offset
            return np.ascontiguousarray(Y), sw
        y = np.asarray(y).reshape(-1)
        idx = np.searchsorted(self.classes, y)
        idx = np.clip(idx, 0, len(self.classes) - 1)
        unknown = self.classes[idx] != y
        if np.any(unknown):
            raise ValueError(
                f"y contains labels not seen when the classes were determined: "
                f"{np.unique(y[unknown])[:5]!r}")
        if self.class_weight is not None:
            sw = sw * self.class_weight[idx]
        if self.n_targets == 1:
            Y = np.where(idx == 1, 1.0, -1.0)[:, None]
        else:
            Y = np.full((n, self.n_targets), -1.0)
            Y[np.arange(n), idx] = 1.0
        return Y, sw
