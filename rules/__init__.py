"""torchlint's rules: one module per rule, found by `torchlint.lint.registry`."""
