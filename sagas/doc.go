package sagas
