"""mindtune's browser console (Gradio). Depends on core, never the other way round."""
