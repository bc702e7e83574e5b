"""Child processes: the reaper, process groups, bubblewrap and Landlock confinement, and process usage."""
