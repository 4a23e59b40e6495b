"""What a run is told: the config file found and validated (`load`), merged with a
command line or an editor's settings into one `RunPlan` (`plan`), the project's declared
metadata (`metadata`: the oldest torch it supports), and the project knowledge of
`[tool.torchlint.semantic]` (`knowledge`)."""
