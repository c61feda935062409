"""docs/kernels_api.md is the current output of docs/gen_kernels_api.py (the docstrings of gpurl.kernels)."""
import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

DOCS = Path(__file__).resolve().parent.parent / "docs"


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_kernels_api", DOCS / "gen_kernels_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_api_reference_is_up_to_date():
    generated = load_generator().render()
    committed = (DOCS / "kernels_api.md").read_text()
    assert committed == generated, "docs/kernels_api.md is out of date: run python docs/gen_kernels_api.py"


def test_api_reference_covers_every_exported_name_with_a_docstring():
    import inspect

    import gpurl.kernels

    text = (DOCS / "kernels_api.md").read_text()
    for name in gpurl.kernels.__all__:
        assert f"`{name}(" in text or f"class `{name}" in text, name
        assert inspect.getdoc(getattr(gpurl.kernels, name)), f"gpurl.kernels.{name} has no docstring"
    assert "EnvKernel.run_python" in text
