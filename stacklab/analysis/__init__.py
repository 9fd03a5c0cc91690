"""What the results say: statistics, trial summaries and verdicts, the flags of runs that
are not what they seem, recommendations and the CI gate."""
