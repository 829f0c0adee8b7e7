"""Projects: ``project.json``, the project layout and the knowledge bases a project uses."""
