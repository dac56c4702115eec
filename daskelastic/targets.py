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


def not_finite(name):
    """The ``ValueError`` for an input ``name`` (``"X"``, ``"y"``, ...) holding NaN or inf."""
    return ValueError(f"{name} contains NaN or infinity")


def sums_overflow(name, cd=True):
    """The Gram solver's ``ValueError`` for finite input ``name`` whose sums overflow float64.

    Finite values near ``np.finfo(float).max`` pass the input checks, and
    their products and sums become inf: the message says so, rather than
    that the input holds NaN or infinity.  It begins with scikit-learn's
    coordinate descent's message, which code written for scikit-learn's
    ElasticNet and Lasso matches (``cd``; Ridge's Cholesky solve has none).
    """
    return ValueError(
        ("Coordinate descent iterations resulted in non-finite parameter values: "
         if cd else "")
        + f"the sums of products of {name} overflow float64. The input data may "
        "contain large values and need to be preprocessed (rescale them, X e.g. "
        "with StandardScaler)")


@dataclass(frozen=True)
class TargetEncoder:
    """Encode one block of labels (or targets) and sample weights.

    The estimators build one encoder per fit, from the whole of ``y``, and
    apply it to in-memory input on the client or to each block of a dask
    collection on the workers (it is frozen and picklable).  A classifier's
    encoder (``classes`` given) turns labels into ``±1`` columns, one-vs-rest:
    with ``n_targets=1``, ``+1`` where the label is ``classes[1]``; otherwise
    column ``k`` is ``+1`` where the label is ``classes[k]``.  A regressor's
    encoder (``classes`` None) subtracts ``offset`` from the targets.  The
    parameters are kept as attributes of the same names.

    Parameters
    ----------
    classes : ndarray or None
        Sorted class labels (as from ``numpy.unique``); None for regression.
    class_weight : ndarray or None
        Weight per class, aligned with ``classes``: a row's sample weight is
        multiplied by the weight of its class.  None: no class weights.
    offset : ndarray or None
        Per-target offset subtracted from regression targets (the estimators
        use their weighted mean); None subtracts nothing.
    n_targets : int
        Columns of the encoded ``Y`` of a classifier: 1 for two classes, else
        the number of classes.  A regressor's ``Y`` has the columns of ``y``
        (not checked against ``n_targets``).

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.targets import TargetEncoder
    >>> encoder = TargetEncoder(classes=np.array(["a", "b", "c"]), n_targets=3)
    >>> Y, sample_weight = encoder.encode(np.array(["b", "a", "c"]))
    >>> Y
    array([[-1.,  1., -1.],
           [ 1., -1., -1.],
           [-1., -1.,  1.]])
    >>> binary = TargetEncoder(classes=np.array([0, 1]), class_weight=np.array([1.0, 3.0]))
    >>> Y, sample_weight = binary.encode(np.array([0, 1, 1]), np.array([1.0, 1.0, 0.5]))
    >>> Y.ravel(), sample_weight
    (array([-1.,  1.,  1.]), array([1. , 3. , 1.5]))
    >>> TargetEncoder(offset=np.array([2.0])).encode(np.array([1.0, 4.0]))[0].ravel()
    array([-1.,  2.])
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
        """Return the encoded targets and sample weights of one block.

        Parameters
        ----------
        y : ndarray of shape (n,) or (n, m)
            The block's labels (flattened for a classifier) or regression
            targets (reshaped to ``n`` rows).  An array: a list is not
            accepted.
        sample_weight : array-like of shape (n,), optional
            The block's sample weights; ones by default.

        Returns
        -------
        Y : ndarray of shape (n, n_targets)
            ``±1`` columns of a classifier, or the regression targets minus
            ``offset`` (as many columns as ``y``), as float64.
        sample_weight : ndarray of shape (n,)
            The sample weights as float64, times the class weight of each
            row's label when ``class_weight`` is set.

        Raises
        ------
        ValueError
            On sample weights with another number of rows than ``y``,
            non-finite targets or weights, negative weights, or labels that
            are not in ``classes``.
        """
        n = y.shape[0]
        if sample_weight is None:
            sw = np.ones(n)
        else:
            sw = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
            if sw.shape[0] != n:
                raise ValueError(
                    f"sample_weight has {sw.shape[0]} rows but y has {n}")
            if not np.all(np.isfinite(sw)):
                raise not_finite("sample_weight")
            if np.any(sw < 0):
                raise ValueError("sample_weight must be non-negative")
        if not self.is_classifier:
            Y = np.asarray(y, dtype=np.float64).reshape(n, -1)
            if not np.all(np.isfinite(Y)):
                raise not_finite("y")
            if self.offset is not None:
                Y = Y - self.offset
            return np.ascontiguousarray(Y), sw
        y = np.asarray(y).reshape(-1)
        if (self.classes.shape[0] == 2 and self.n_targets == 1
                and y.dtype.kind in "biuf" and y.dtype == self.classes.dtype):
            # two classes of numbers, of the labels' own type (as the
            # estimators find them): two comparisons, no search
            pos = y == self.classes[1]
            known = pos | (y == self.classes[0])
            if not known.all():
                raise self._unknown(y, ~known)
            if self.class_weight is not None:
                sw = sw * np.where(pos, self.class_weight[1], self.class_weight[0])
            return np.where(pos, 1.0, -1.0)[:, None], sw
        idx = np.searchsorted(self.classes, y)
        idx = np.clip(idx, 0, len(self.classes) - 1)
        unknown = self.classes[idx] != y
        if np.any(unknown):
            raise self._unknown(y, unknown)
        if self.class_weight is not None:
            sw = sw * self.class_weight[idx]
        if self.n_targets == 1:
            Y = np.where(idx == 1, 1.0, -1.0)[:, None]
        else:
            Y = np.full((n, self.n_targets), -1.0)
            Y[np.arange(n), idx] = 1.0
        return Y, sw

    @staticmethod
    def _unknown(y, unknown):
        """The ``ValueError`` naming the labels of ``y`` where ``unknown``."""
        return ValueError(
            f"y contains labels not seen when the classes were determined: "
            f"{np.unique(y[unknown])[:5]!r}")
