"""A gate config for tests: bars low enough for a 3-epoch model to be the first champion,
comparisons with the champion that a better model passes and a worse one fails."""

LENIENT_GATES = """
promotion:
  split: test
  metrics:
    - {metric: roc_auc, greater_is_better: true, threshold: 0.6, min_absolute_change: 0.0}
    - {metric: accuracy, greater_is_better: true, threshold: 0.6}
    - {metric: log_loss, greater_is_better: false, threshold: 0.7, min_relative_change: 0.0}
model_checks:
  latency: {repeats: 5}
"""
