"""A model file given without ``:factory`` is told what to add and which functions the file defines (read, not
run), not called an unknown model; a missing file is said missing."""

import pytest

from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.specs import resolve_model_spec


def test_a_bare_model_file_is_asked_for_its_factory_naming_the_files_functions(tmp_path):
    model_file = tmp_path / "net.py"
    model_file.write_text("import sys\nsys.exit(3)  # never run\n\ndef build():\n    pass\n\n"
                          "def _helper():\n    pass\n\nclass Net:\n    pass\n")
    with pytest.raises(WorkloadError) as info:
        resolve_model_spec(str(model_file))
    message = str(info.value)
    assert message == (f"{model_file} names no factory: give {model_file}:FUNCTION, the function that returns "
                       "the model (defined there: build, Net)")


def test_a_missing_model_file_is_said_missing(tmp_path):
    with pytest.raises(WorkloadError, match=r"^model factory file not found: .*nothere\.py$"):
        resolve_model_spec(str(tmp_path / "nothere.py"))
