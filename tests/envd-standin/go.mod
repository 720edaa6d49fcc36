module e2b-images/tests/envd-standin

go 1.19
