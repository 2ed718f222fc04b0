"""The ORBIT_HOME layout, run records, atomic files, locks and the listing index."""
