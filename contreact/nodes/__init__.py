"""The five graph nodes (assemble, invoke, parse, dispatch, reflect) and their pure helpers."""
