module ringlab.local/go

go 1.19
