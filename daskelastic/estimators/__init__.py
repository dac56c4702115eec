"""scikit-learn estimators trained with distributed CoCoA+.

The estimators validate their input, map scikit-learn's parameters to the
normalised problem (:mod:`daskelastic.objective`), hand the data to a backend
(:mod:`daskelastic.session`) and store the fitted attributes.  They hold no
numerics and submit no futures themselves.

``_base`` holds the fit they share, ``_input`` the checks and conversions of
their input, ``_classifiers`` and ``_regressors`` the classes, and ``_docs``
the docstring sections they share.
"""

from ._classifiers import LinearSVC, LogisticRegression
from ._regressors import ElasticNet, Lasso, PoissonRegressor, Ridge

__all__ = ["LogisticRegression", "LinearSVC", "Ridge", "Lasso", "ElasticNet", "PoissonRegressor"]
