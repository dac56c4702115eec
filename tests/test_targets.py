"""TargetEncoder: labels and weights of one block, as the local solvers take them."""

import numpy as np
import pytest

from daskelastic.targets import TargetEncoder


def _reference(y, classes, sample_weight=None, class_weight=None):
    """±1 columns (one for two classes) and weights, from the definition."""
    idx = np.array([list(classes).index(v) for v in y])
    sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    if class_weight is not None:
        sw = sw * np.asarray(class_weight)[idx]
    if len(classes) == 2:
        return np.where(idx == 1, 1.0, -1.0)[:, None], sw
    Y = -np.ones((len(y), len(classes)))
    Y[np.arange(len(y)), idx] = 1.0
    return Y, sw


@pytest.mark.parametrize("labels", [
    np.array([3, 7, 7, 3, 7]),
    np.array([0.5, -1.0, -1.0, 0.5, 0.5]),
    np.array([False, True, True, False, True]),
    np.array(["no", "yes", "yes", "no", "no"], dtype=object),      # searched
    np.array(["a", "c", "b", "c", "a"]),                               # three classes
])
@pytest.mark.parametrize("weighted", [False, True])
def test_encode_gives_the_signs_and_weights_of_the_definition(labels, weighted):
    classes = np.unique(labels)
    sw = np.array([1.0, 2.0, 0.5, 0.0, 3.0]) if weighted else None
    cw = np.linspace(0.5, 2.0, len(classes))
    for class_weight in (None, cw):
        enc = TargetEncoder(classes=classes, class_weight=class_weight,
                            n_targets=1 if len(classes) == 2 else len(classes))
        Y, w = enc.encode(labels, sw)
        Y_ref, w_ref = _reference(labels, classes, sw, class_weight)
        np.testing.assert_array_equal(Y, Y_ref)
        np.testing.assert_array_equal(w, w_ref)
        assert Y.dtype == w.dtype == np.float64


@pytest.mark.parametrize("labels, classes, unknown", [
    (np.array([0, 1, 2, 1]), np.array([0, 1]), "2"),           # two classes of numbers
    (np.array([0.0, np.nan, 1.0]), np.array([0.0, 1.0]), "nan"),
    (np.array([0, 1, 5, 2]), np.array([0, 1, 2]), "5"),          # three: searched
    (np.array(["x", "y", "z"], dtype=object), np.array(["x", "y"], dtype=object), "'z'"),
])
def test_labels_outside_the_classes_are_named(labels, classes, unknown):
    with pytest.raises(ValueError, match="labels not seen when the classes were "
                                         "determined") as error:
        TargetEncoder(classes=classes, n_targets=1 if len(classes) == 2 else 3).encode(
            labels)
    assert unknown in str(error.value)


@pytest.mark.parametrize("weights, message", [
    ([1.0, -1.0, 1.0], "must be non-negative"),
    ([1.0, np.nan, 1.0], "NaN or infinity"),
    ([1.0, 1.0], "sample_weight has 2 rows but y has 3"),
])
def test_bad_sample_weights_are_refused(weights, message):
    with pytest.raises(ValueError, match=message):
        TargetEncoder(classes=np.array([0, 1])).encode(np.array([0, 1, 1]),
                                                        np.array(weights))


@pytest.mark.parametrize("labels", [np.array([4, 9, 9, 4, 9]),
                                    np.array([0.0, 1.0, 1.0, 0.0, 0.0]),
                                    np.array([True, False, True, True, False])])
def test_two_classes_of_numbers_encode_as_the_search_does(labels):
    """The two comparisons that encode two classes of numbers give what the
    search over the classes gives (the same labels as Python objects)."""
    classes = np.unique(labels)
    cw = np.array([0.5, 2.0])
    sw = np.array([1.0, 0.0, 2.0, 3.0, 0.5])
    fast = TargetEncoder(classes=classes, class_weight=cw).encode(labels, sw)
    searched = TargetEncoder(classes=classes.astype(object), class_weight=cw).encode(
        labels.astype(object), sw)
    for a, b in zip(fast, searched):
        np.testing.assert_array_equal(a, b)


def test_two_classes_with_more_targets_get_a_column_each():
    """n_targets is kept for two classes too (a column per class)."""
    Y, _ = TargetEncoder(classes=np.array([0, 1]), n_targets=2).encode(np.array([1, 0, 1]))
    np.testing.assert_array_equal(Y, [[-1.0, 1.0], [1.0, -1.0], [-1.0, 1.0]])
