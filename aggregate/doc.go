package aggregate
