"""
Sparse logistic regression
==========================

Which of 1,500 one-hot features (carriers, origins, destinations, hours,
months) predict a late flight?  Fit L1-penalised logistic regression on
5,000 real New York flights for a path of ``C`` values: the smaller ``C``,
the fewer features keep a coefficient.  Each fit reaches the objective of
scikit-learn's ``saga`` for the same ``C``, and mostly its non-zero pattern:
where the one-hot columns of a category (the weekdays, say) add up to the
intercept's constant column, the optimum can be a segment, and two solvers may
stop at different points of it with the same objective.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression as SkLogisticRegression

from daskelastic import LogisticRegression
from daskelastic.datasets import load_flights

X, y, names = load_flights(n_rows=5_000)
used = np.asarray((X != 0).sum(axis=0)).ravel() > 0     # features seen at all
X, names = X[:, used].tocsr(), np.asarray(names)[used]

Cs = np.logspace(-2.5, -0.5, 6)
kept = []


def objective(coef, intercept, C):
    """scikit-learn's L1 logistic objective."""
    margins = np.where(y == 1, 1.0, -1.0) * (X @ coef + intercept)
    return C * np.sum(np.logaddexp(0.0, -margins)) + np.abs(coef).sum()


for C in Cs:
    clf = LogisticRegression(C=C, penalty="l1", tol=1e-7, max_iter=3000).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # scikit-learn 1.8 deprecates ``penalty``
        saga = SkLogisticRegression(C=C, penalty="l1", solver="saga", tol=1e-10,
                                    max_iter=100_000).fit(X, y)
    kept.append(np.count_nonzero(clf.coef_))
    ours, theirs = (objective(m.coef_[0], m.intercept_[0], C) for m in (clf, saga))
    print(f"C={C:<7.3g} non-zero {kept[-1]:4d} of {X.shape[1]} "
          f"(saga {np.count_nonzero(saga.coef_):4d}), objective vs saga "
          f"{(ours - theirs) / theirs:+.0e}, rounds {clf.n_iter_[0]}, "
          f"certified gap {clf.duality_gap_:.1e}")

order = np.argsort(-np.abs(clf.coef_[0]))[:8]
print("the strongest at the largest C:", list(names[order]))

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogx(Cs, kept, marker="o")
ax.set_xlabel("C")
ax.set_ylabel("non-zero coefficients")
ax.set_title("L1 logistic regression on flights")
fig.tight_layout()
plt.show()
