"""One-hot encoding of the categorical columns of pandas and dask dataframes.

The estimators one-hot encode the string, object and ``category`` columns of
a dataframe with scikit-learn's :class:`~sklearn.preprocessing.OneHotEncoder`
(``handle_unknown="ignore"``: a category not seen in ``fit`` sets no feature),
inside a :class:`~sklearn.compose.ColumnTransformer` that passes the numeric
columns through.  The categories are read in one pass over the data, on the
workers for a dask dataframe, and the rows are encoded where they are: a
dask dataframe's partitions on the workers, block by block.

The command line (``python -m daskelastic fit``) one-hot encodes a table's
text, categorical and boolean columns with the same encoder
(``one_hot_encoder``), inside the ``ColumnTransformer`` of the pipeline it
saves.
"""

import numpy as np

__all__ = ["categorical_columns", "fit_frame_encoder", "encode_frame"]


def categorical_columns(frame):
    """The columns of ``frame`` that the estimators one-hot encode.

    Those of ``category``, string or ``object`` dtype; booleans are numbers.

    Parameters
    ----------
    frame : pandas.DataFrame or dask.dataframe.DataFrame
        A table (a dask dataframe is read from its metadata alone).

    Returns
    -------
    list
        The column labels, in the table's order; empty for anything that
        is not a dataframe.

    Examples
    --------
    >>> import pandas as pd
    >>> from daskelastic.encoding import categorical_columns
    >>> frame = pd.DataFrame({"carat": [0.3], "cut": ["Ideal"], "vivid": [True],
    ...                       "color": pd.Categorical(["E"])})
    >>> categorical_columns(frame)
    ['cut', 'color']
    """
    import pandas as pd

    dtypes = getattr(frame, "dtypes", None)
    if not isinstance(dtypes, pd.Series):   # an array, a series, a dask array
        return []
    return [c for c, t in dtypes.items()
            if isinstance(t, (pd.CategoricalDtype, pd.StringDtype))
            or (isinstance(t, np.dtype) and t.kind in "OSU") or _arrow_text(t)]


def _arrow_text(dtype):
    """Whether ``dtype`` is pyarrow's string or dictionary type (``dtype_backend="pyarrow"``)."""
    import pandas as pd

    if not isinstance(dtype, pd.ArrowDtype):
        return False
    import pyarrow as pa

    t = dtype.pyarrow_dtype
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t)


def missing_as_nan(values):
    """``values`` as ``object`` columns with each missing value ``np.nan``.

    scikit-learn's encoders take ``None`` and ``np.nan`` as a category of
    their own but refuse ``pd.NA`` (pandas' ``string`` dtype): this makes the
    three one category, ``nan``.

    Parameters
    ----------
    values : pandas.DataFrame
        Categorical columns.

    Returns
    -------
    pandas.DataFrame
        The same columns, of ``object`` dtype.
    """
    out = values.astype(object)
    return out.where(out.notna(), np.nan)


def as_float64(values):
    """Numeric columns as a float64 array (booleans 0/1, ``pd.NA`` NaN).

    Parameters
    ----------
    values : pandas.DataFrame
        Numeric columns.

    Returns
    -------
    ndarray of shape (len(values), n_columns)
    """
    return values.to_numpy(dtype=np.float64, na_value=np.nan)


def _column_equals_value(column, category):
    """A one-hot feature's name: ``column=value``."""
    return f"{column}={category}"


def one_hot_encoder(prepare=missing_as_nan):
    """The one-hot encoder of categorical columns, unfitted.

    Parameters
    ----------
    prepare : callable, default=missing_as_nan
        Applied to the columns before they are encoded (a module-level
        function, so that the encoder pickles).

    Returns
    -------
    sklearn.pipeline.Pipeline
        ``prepare``, then a sparse float64 ``OneHotEncoder`` that ignores
        categories it did not see and names features ``column=value``.
    """
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

    return make_pipeline(
        FunctionTransformer(prepare, feature_names_out="one-to-one"),
        OneHotEncoder(handle_unknown="ignore", sparse_output=True,
                      dtype=np.float64, feature_name_combiner=_column_equals_value))


def fit_frame_encoder(columns, categories):
    """A fitted encoder of a table: numeric columns as they are, then one-hot ones.

    Parameters
    ----------
    columns : list
        All the table's columns, in its order.
    categories : dict
        For each categorical column, its distinct values (in any order,
        repeats allowed); scikit-learn sorts them, a missing value last.

    Returns
    -------
    sklearn.compose.ColumnTransformer
        Fitted: the numeric columns passed through first, then the one-hot
        columns, named by ``get_feature_names_out()``.

    Raises
    ------
    ValueError
        When a column's values mix strings and numbers (scikit-learn's
        encoders cannot sort them), naming the column.

    Examples
    --------
    >>> import pandas as pd
    >>> from daskelastic.encoding import encode_frame, fit_frame_encoder
    >>> fit_rows = pd.DataFrame({"carat": [0.3, 1.1], "cut": ["Ideal", "Fair"]})
    >>> enc = fit_frame_encoder(fit_rows.columns, {"cut": fit_rows["cut"]})
    >>> enc.get_feature_names_out().tolist()
    ['carat', 'cut=Fair', 'cut=Ideal']
    >>> encode_frame(enc, pd.DataFrame({"carat": [2.0], "cut": ["Good"]})).toarray()
    array([[2., 0., 0.]])
    """
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import FunctionTransformer

    columns = list(columns)
    # columns chosen by position: labels need not be strings (scikit-learn
    # selects strings by name, integers by position)
    categorical = [i for i, c in enumerate(columns) if c in categories]
    numeric = [i for i, c in enumerate(columns) if c not in categories]
    parts = []
    if numeric:
        parts.append(("numeric", FunctionTransformer(as_float64, feature_names_out="one-to-one"),
                      numeric))
    if categorical:
        parts.append(("categorical", one_hot_encoder(), categorical))
    encoder = ColumnTransformer(parts, sparse_threshold=1.0, verbose_feature_names_out=False)
    distinct = {}
    for i in categorical:
        c = columns[i]
        values = pd.unique(missing_as_nan(pd.DataFrame({"v": np.asarray(
            categories[c], dtype=object)}))["v"])
        text = [isinstance(v, str) for v in values]
        if any(text) and not all(t or _is_missing(v) for t, v in zip(text, values)):
            kinds = sorted({type(v).__name__ for v in values if not _is_missing(v)})
            raise ValueError(f"column {c!r} mixes strings and other values "
                             f"({', '.join(kinds)}): make it one type first, e.g. "
                             f"X[{c!r}].astype(str)")
        distinct[i] = values
    # fitted on a frame of the distinct values alone (each column repeated to
    # the longest one's length): the categories a pass over the table found
    longest = max([len(v) for v in distinct.values()] + [1])
    sample = pd.DataFrame({i: (pd.Series(np.resize(distinct[i], longest), dtype=object)
                               if i in distinct and len(distinct[i])
                               else pd.Series(np.zeros(longest)))
                           for i in range(len(columns))})
    sample.columns = [str(c) for c in columns]   # as encode_frame names them
    return encoder.fit(sample)


def _is_missing(value):
    return value is None or (isinstance(value, float) and np.isnan(value))


def encode_frame(encoder, frame):
    """The features of ``frame``'s rows: CSR float64.

    Parameters
    ----------
    encoder : sklearn.compose.ColumnTransformer
        From :func:`fit_frame_encoder`.
    frame : pandas.DataFrame
        Rows with the encoder's columns.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (len(frame), n_features)
        The rows' numeric columns, then their one-hot features.
    """
    import pandas as pd
    import scipy.sparse as sp
    from sklearn.utils.validation import assert_all_finite

    if not isinstance(frame, pd.DataFrame):   # an array or a list of rows
        frame = pd.DataFrame(frame)
    if len(frame) == 0:   # (scikit-learn's encoders refuse empty input)
        return sp.csr_matrix((0, len(encoder.get_feature_names_out())))
    # the fit's labels, which scikit-learn reads feature names from (the
    # estimators have checked the caller's names, or warned without them)
    frame = frame.set_axis(list(encoder.feature_names_in_), axis=1)
    out = sp.csr_matrix(encoder.transform(frame), dtype=np.float64)
    assert_all_finite(out.data, input_name="X")   # a numeric column's NaN or inf
    return out


def partition_categories(frame, categorical):
    """One partition's distinct values of each categorical column, and its rows.

    Parameters
    ----------
    frame : pandas.DataFrame
        A partition.
    categorical : list
        Its categorical columns.

    Returns
    -------
    dict, int
        ``{column: distinct values}`` and ``len(frame)``.
    """
    import pandas as pd

    values = missing_as_nan(frame[categorical])
    return {c: pd.unique(values[c]) for c in categorical}, len(frame)


def merge_categories(parts, categorical):
    """The distinct values of each column over :func:`partition_categories`' results.

    Parameters
    ----------
    parts : list of (dict, int)
        One per partition.
    categorical : list
        The categorical columns.

    Returns
    -------
    dict
        ``{column: distinct values}``.
    """
    import pandas as pd

    return {c: pd.unique(np.concatenate([p[0][c] for p in parts] or [np.empty(0, object)]))
            for c in categorical}
