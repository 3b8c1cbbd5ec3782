package tron
