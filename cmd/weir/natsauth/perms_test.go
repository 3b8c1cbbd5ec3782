package natsauth

import (
	"reflect"
	"testing"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

// TestEveryStartGivesAPrincipalTheSameRulesInTheSameOrder: the rights are
// computed once, from the principals in their file's order, so two
// authenticators over the same principals hold the same rules, deny rules
// included, in the same order.
func TestEveryStartGivesAPrincipalTheSameRulesInTheSameOrder(t *testing.T) {
	list := []api.Principal{{Name: "alice", Token: "alice-token-01", Roles: []api.Role{api.RoleRequester}}}
	for _, n := range []string{"bob", "carol", "dave", "erin", "frank", "grace"} {
		list = append(list, api.Principal{Name: n, Token: n + "-token-000001", Roles: []api.Role{api.RoleApprover}})
	}
	ps, err := api.NewPrincipals(list)
	if err != nil {
		t.Fatal(err)
	}
	first := New(ps, nil).perms
	if len(first) != len(list) {
		t.Fatalf("%d principals with rights, want %d", len(first), len(list))
	}
	for range 5 {
		if again := New(ps, nil).perms; !reflect.DeepEqual(again, first) {
			t.Fatal("another start gave other rules, or the same in another order")
		}
	}
	// alice's deny rules name the others' consumers in the file's order.
	deny := first["alice"].Publish.Deny
	want := OthersNotifyConsumerDeny("$JS.API", append(NotifyConsumerNames("bob", nil), NotifyConsumerNames("carol", nil)...))
	if len(deny) < len(want) || !reflect.DeepEqual(deny[:len(want)], want) {
		t.Fatalf("alice's deny rules do not start with bob's then carol's consumers:\n%v", deny)
	}
}
