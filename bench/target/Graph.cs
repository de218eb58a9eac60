// Benchmark target for the object graph (issue 34): a process holding millions of objects joined by tens of
// millions of references, of the shapes a leak hunt meets: binary trees whose nodes share payloads, circular
// doubly-linked lists of named nodes, a dictionary of lists, arrays of references across all of them, and holders
// of shared subtrees.  Usage: Graph SCALE [SEED], SCALE in millions of objects (about; 10 gives some 10.5 M
// objects and 22 M references).  Everything is held by static fields (handle roots), prints
// "READY <pid> <objects> <references>" (what it made, counted as it made it) and waits on stdin while dumped.
using System;
using System.Collections.Generic;
using System.Diagnostics;

class Node { public Node Left, Right; public object Payload; public int Id; }
class ListNode { public ListNode Next, Prev; public string Name; }
class Holder { public Node Shared; public Holder Link; }

static class Graph
{
    static List<object> Keep = new List<object>();
    static long Objects, References;

    static Node Tree(int depth, byte[][] payloads, Random rnd, ref int id)
    {
        var n = new Node { Id = id++, Payload = payloads[rnd.Next(payloads.Length)] };
        Objects++;
        References++;  // the payload
        if (depth > 1)
        {
            n.Left = Tree(depth - 1, payloads, rnd, ref id);
            n.Right = Tree(depth - 1, payloads, rnd, ref id);
            References += 2;
        }
        return n;
    }

    static void Main(string[] args)
    {
        double scale = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) / 10.0 : 1.0;
        var rnd = new Random(args.Length > 1 ? int.Parse(args[1]) : 12345);
        var payloads = new byte[1000][];
        for (int i = 0; i < payloads.Length; i++) { payloads[i] = new byte[16 + rnd.Next(48)]; Objects++; }
        Keep.Add(payloads); Objects++; References += payloads.Length;

        // binary trees of 2^20 - 1 nodes, payloads shared among them
        var trees = new List<Node>();
        int id = 0;
        for (int t = 0; t < (int)Math.Round(4 * scale); t++) { trees.Add(Tree(20, payloads, rnd, ref id)); References++; }
        Keep.Add(trees); Objects += 2;

        // circular doubly-linked lists of named nodes: cycles of 20,000
        var lists = new List<ListNode>();
        for (int l = 0; l < (int)Math.Round(100 * scale); l++)
        {
            ListNode first = null, last = null;
            for (int i = 0; i < 20000; i++)
            {
                var n = new ListNode { Name = "item-" + l + "-" + i, Prev = last };
                Objects += 2; References += 2;
                if (last != null) { last.Next = n; References++; } else first = n;
                last = n;
            }
            last.Next = first; first.Prev = last; References += 2;
            lists.Add(first); References++;
        }
        Keep.Add(lists); Objects += 2;

        // a dictionary of lists: 100,000 keys, each a List<Node> of 10 leaves
        var index = new Dictionary<string, List<Node>>();
        for (int k = 0; k < (int)Math.Round(100000 * scale); k++)
        {
            var bucket = new List<Node>(10);
            for (int i = 0; i < 10; i++) { bucket.Add(new Node { Id = id++, Payload = payloads[i] }); References += 2; }
            index["key-" + k] = bucket;
            Objects += 14; References += 3;  // key, list, its array, 10 nodes, ...; the entry's key and value
        }
        Keep.Add(index); Objects += 3;

        // arrays of references across everything: 10,000 of 100
        var all = new List<Node>();
        foreach (var b in index.Values) all.Add(b[0]);
        var cross = new object[(int)Math.Round(10000 * scale)][];
        for (int a = 0; a < cross.Length; a++)
        {
            cross[a] = new object[100];
            for (int i = 0; i < 100; i++) cross[a][i] = (i % 2 == 0) ? (object)all[rnd.Next(all.Count)] : lists[rnd.Next(lists.Count)];
            Objects++; References += 101;
        }
        Keep.Add(cross); Objects++;

        // holders of shared subtrees, chained in pairs
        var holders = new Holder[(int)Math.Round(1000000 * scale)];
        for (int h = 0; h < holders.Length; h++)
        {
            Node sub = trees[rnd.Next(trees.Count)];
            for (int d = rnd.Next(12); d > 0 && sub.Left != null; d--) sub = rnd.Next(2) == 0 ? sub.Left : sub.Right;
            holders[h] = new Holder { Shared = sub, Link = h > 0 ? holders[h - 1] : null };
            Objects++; References += h > 0 ? 3 : 2;
        }
        Keep.Add(holders); Objects++;
        GC.Collect();
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id + " " + Objects + " " + References);
        Console.ReadLine();
        GC.KeepAlive(Keep);
    }
}
