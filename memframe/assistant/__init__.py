"""The Assistant side: model clients, recall at the binding, tools, and the turn loop."""
