"""The README's example runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_example_runs_and_certifies_its_fit(capsys):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    gap = float(re.search(r"duality gap (\S+)", printed).group(1))
    assert gap <= 1e-4                                  # LogisticRegression's tol
    assert 0.6 <= float(re.search(r"accuracy (\S+)", printed).group(1)) <= 1.0
