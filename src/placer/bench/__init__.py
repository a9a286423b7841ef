"""Named experiments and reports built on the methods and the simulator."""
