"""help(gpuwise) is a map of the parts and their main functions, and the public result and request types
say what they hold."""

from __future__ import annotations

import gpuwise

PARTS = {"catalog": "load_catalog", "workload": "Workload", "trace": "trace_workload", "memory": "estimate_memory",
         "runtime": "predict_step_time", "plan": "model_for", "launch": "plan_launch", "monitor": "Sampler",
         "runlog": "RunLog", "report": "build_report", "advise": "advise(", "calibrate": "calibrate(",
         "guard": "Guard("}


def test_the_package_docstring_maps_every_part_to_its_main_function():
    doc = gpuwise.__doc__
    lines = doc.splitlines()
    for part, entry in PARTS.items():
        assert any(line.strip().startswith(part + " ") and entry in line for line in lines), (part, entry)
    assert "with_default_precision" in doc and "recommend(model, catalog" in doc


def test_public_types_and_functions_have_docstrings():
    from gpuwise.advise import AdviceReport, advise, analyze_curve
    from gpuwise.calibrate import user_calibration_path
    from gpuwise.catalog import Catalog
    from gpuwise.plan import Constraints, PlanError, Recommendation, ranking_currency
    from gpuwise.report import Report
    from gpuwise.runtime import Calibration

    for obj in (Recommendation, Constraints, PlanError, Catalog, Calibration, Report, AdviceReport, advise,
                analyze_curve, ranking_currency, user_calibration_path):
        doc = obj.__doc__ or ""
        assert len(doc) > 40 and not doc.startswith(obj.__name__ + "("), obj.__name__
    assert "seconds" in Constraints.__doc__ and "budget_currency" in Constraints.__doc__
