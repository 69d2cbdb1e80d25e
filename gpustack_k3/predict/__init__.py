"""Predict what a launch will do (decode step, TTFT, end-to-end) and advise the knobs. Needs the ``[predict]``
extra (aiconfigurator-core); design: docs/design/003-predict.md."""
