"""mindtune's engine: everything that is not UI. Importable without Gradio."""
