"""Policy networks (torch, the optional ``torch`` extra). ``placer.nn.placeto``: Placeto's
graph-embedding policy; ``placer.nn.features``: the features and reachability sets it reads."""
