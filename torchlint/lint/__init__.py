"""Linting one file: its text screened (`tokens`) and parsed (`parser`), the rules found
(`registry`, `catalog`) and run on its semantic model (`linter`), suppressions (`noqa`),
each fix pass checked (`gate`, `undefined`), an editor's buffer parsed again where it
changed (`incremental`), and notebooks as one program (`notebook`, `notebook_json`)."""
