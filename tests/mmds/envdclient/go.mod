module e2b-images/tests/mmds/envdclient

go 1.19
